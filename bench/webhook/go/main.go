// A trivial validating webhook served by controller-runtime's webhook server: the Go anchor of
// bench/webhook. It allows every review, like ../server.py, and answers on /validate with the
// serving pair in CERT_DIR (tls.crt / tls.key).
//
//	go build -o goserver . && ./goserver PORT CERT_DIR
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goserver PORT CERT_DIR")
		os.Exit(2)
	}
	port, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "PORT:", err)
		os.Exit(2)
	}
	server := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: os.Args[2]})
	allow := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("")
	})
	server.Register("/validate", &admission.Webhook{Handler: allow})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() { // "ready" once the TLS listener answers, as ../server.py prints it
		started := server.StartedChecker()
		for started(nil) != nil {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Println("ready")
	}()
	if err := server.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "webhook server:", err)
		os.Exit(1)
	}
}
