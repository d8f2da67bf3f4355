// gowriter: an independent measure of the API server's write limit for bench/client. It creates
// or patches ConfigMaps with client-go's typed clientset from N goroutines, with the client-side
// rate limiter off (QPS < 0), and prints one JSON line: operations, wall time, ops/s and the
// process's CPU seconds. Creates carry 1 KB of data, patches are JSON merge patches of one label
// on the objects bench_client.py seeded, as in the Python workers.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig")
	namespace := flag.String("namespace", "", "namespace of the ConfigMaps")
	op := flag.String("op", "create", "create or patch")
	concurrency := flag.Int("concurrency", 32, "concurrent requests (goroutines)")
	ops := flag.Int("ops", 2000, "number of requests")
	patchTargets := flag.Int("patch-targets", 10000, "patch bench-00000 .. bench-<n-1>")
	http1 := flag.Bool("http1", false, "HTTP/1.1 with one connection per goroutine instead of HTTP/2")
	contentType := flag.String("content-type", "application/json", "request and response encoding")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	config.QPS = -1 // no client-side rate limit
	config.ContentType = *contentType
	config.AcceptContentTypes = *contentType
	if *http1 {
		config.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cms := client.CoreV1().ConfigMaps(*namespace)
	ctx := context.Background()
	// Warm-up outside the timing: connection and TLS set up.
	if _, err := cms.List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	data := strings.Repeat("x", 1024)
	pid := os.Getpid()
	one := func(i int) error {
		switch *op {
		case "create":
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gw-%d-%d", pid, i)},
				Data:       map[string]string{"d": data},
			}
			_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
			return err
		case "patch":
			body := fmt.Sprintf(`{"metadata":{"labels":{"p":"%d"}}}`, i)
			name := fmt.Sprintf("bench-%05d", i%*patchTargets)
			_, err := cms.Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
		return fmt.Errorf("unknown op %q", *op)
	}

	var next, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0 := cpuSeconds()
	t0 := time.Now()
	for w := 0; w < *concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= *ops {
					return
				}
				if err := one(i); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0).Seconds()
	out := map[string]any{
		"impl":        "client-go",
		"op":          *op,
		"concurrency": *concurrency,
		"http1":       *http1,
		"count":       *ops,
		"failed":      failed.Load(),
		"wall":        wall,
		"cpu":         cpuSeconds() - cpu0,
		"ops_per_s":   float64(*ops) / wall,
	}
	if e := firstErr.Load(); e != nil {
		out["first_error"] = e
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
