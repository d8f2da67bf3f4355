// goinformer: the client-go baseline for bench/cache. It syncs one SharedIndexInformer over a
// namespace (ConfigMaps through the typed clientset, anything else through the dynamic client)
// and prints one JSON line: sync time, process CPU time and RSS before/after.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			fields := strings.Fields(line)
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func stripManagedFields(obj interface{}) (interface{}, error) {
	if accessor, ok := obj.(metav1.Object); ok {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// dropLastApplied also removes kubectl's last-applied-configuration annotation (a copy of the
// whole object as applied), the transform bench/scale's "transformed" form measures.
func dropLastApplied(obj interface{}) (interface{}, error) {
	if accessor, ok := obj.(metav1.Object); ok {
		accessor.SetManagedFields(nil)
		if a := accessor.GetAnnotations(); a != nil {
			if _, found := a[lastApplied]; found {
				delete(a, lastApplied)
				if len(a) == 0 {
					a = nil
				}
				accessor.SetAnnotations(a)
			}
		}
	}
	return obj, nil
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig")
	namespace := flag.String("namespace", "", "namespace to watch")
	resource := flag.String("resource", "configmaps", "configmaps, or group/version/resource for the dynamic client")
	strip := flag.Bool("strip-managed-fields", true, "drop managedFields before caching (kubeop's default)")
	metadataOnly := flag.Bool("metadata-only", false, "cache PartialObjectMetadata (a metadata informer)")
	dropApplied := flag.Bool("drop-last-applied", false, "also drop the last-applied-configuration annotation")
	// client-go's typed clients of built-in kinds ask for protobuf by default (v0.35+); with
	// -json they speak JSON like kubeop and the dynamic client.
	jsonOnly := flag.Bool("json", false, "typed clients: JSON instead of their default protobuf")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		panic(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	if *jsonOnly {
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
	}
	// Clients are created and warmed up (TLS handshake, one request) before measuring, as an
	// operator's are by the time it starts its informers; the Python side does the same.
	clientset := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	meta := metadata.NewForConfigOrDie(cfg)
	if _, err := clientset.Discovery().ServerVersion(); err != nil {
		panic(err)
	}
	runtime.GC()
	debug.FreeOSMemory()
	rssBefore, cpuBefore := rssBytes(), cpuSeconds()
	start := time.Now()

	var informer cache.SharedIndexInformer
	if *metadataOnly {
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		if parts := strings.Split(*resource, "/"); len(parts) == 3 {
			gvr = schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		}
		factory := metadatainformer.NewFilteredSharedInformerFactory(meta, 0, *namespace, nil)
		informer = factory.ForResource(gvr).Informer()
	} else if *resource == "configmaps" {
		factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(*namespace))
		informer = factory.Core().V1().ConfigMaps().Informer()
	} else {
		parts := strings.Split(*resource, "/")
		gvr := schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, *namespace, nil)
		informer = factory.ForResource(gvr).Informer()
	}
	if *dropApplied {
		_ = informer.SetTransform(dropLastApplied)
	} else if *strip {
		_ = informer.SetTransform(stripManagedFields)
	}
	added := 0
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(interface{}) { added++ }})
	stop := make(chan struct{})
	go informer.Run(stop)
	// Polled every millisecond: cache.WaitForCacheSync polls every 100 ms, which rounded every
	// sync time up to the next tenth of a second.
	for !informer.HasSynced() {
		time.Sleep(time.Millisecond)
	}
	syncSeconds := time.Since(start).Seconds()
	cpu := cpuSeconds() - cpuBefore
	rssSynced := rssBytes()
	runtime.GC()
	rssAfterGC := rssBytes()
	out, _ := json.Marshal(map[string]interface{}{
		"impl":         "client-go " + clientGoVersion(),
		"objects":      len(informer.GetStore().ListKeys()),
		"handler_adds": added,
		"sync_seconds": syncSeconds,
		"cpu_seconds":  cpu,
		"rss_before":   rssBefore,
		"rss_synced":   rssSynced,
		"rss_after_gc": rssAfterGC,
		"go_max_procs": runtime.GOMAXPROCS(0),
		"watch_list":   os.Getenv("KUBE_FEATURE_WatchListClient") != "false",
		"json":         *jsonOnly,
	})
	fmt.Println(string(out))
	close(stop)
}

func clientGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/client-go" {
				return dep.Version
			}
		}
	}
	return "unknown"
}
