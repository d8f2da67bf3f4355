// crwidget: the controller-runtime anchor of bench/scale. The same Widget operator as
// bench/operator/kubeop_operator.py (each Widget owns a ConfigMap holding spec.value and gets
// status.observedGeneration and status.configMap), written with controller-runtime: Widgets as
// unstructured objects, ConfigMaps typed, managedFields stripped from both caches (kubeop's
// default transform). Prints "ready" once the manager runs, "synced <seconds> <unix time>" once its
// caches have synced and "first <unix time>" when its first reconcile starts, all on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var widgetGVK = schema.GroupVersionKind{Group: "bench.kubeop.dev", Version: "v1", Kind: "Widget"}

func newWidget() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(widgetGVK)
	return u
}

type reconciler struct {
	c     client.Client
	first sync.Once
}

func unixNow() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.first.Do(func() { fmt.Printf("first %.6f\n", unixNow()) })
	widget := newWidget()
	if err := r.c.Get(ctx, req.NamespacedName, widget); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	value, _, _ := unstructured.NestedString(widget.Object, "spec", "value")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.c, cm, func() error {
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data["value"] = value
		return controllerutil.SetControllerReference(widget, cm, r.c.Scheme())
	}); err != nil {
		return reconcile.Result{}, err
	}
	gen := widget.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(widget.Object, "status", "observedGeneration")
	name, _, _ := unstructured.NestedString(widget.Object, "status", "configMap")
	if observed == gen && name == req.Name {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFrom(widget.DeepCopy())
	_ = unstructured.SetNestedField(widget.Object, gen, "status", "observedGeneration")
	_ = unstructured.SetNestedField(widget.Object, req.Name, "status", "configMap")
	return reconcile.Result{}, r.c.Status().Patch(ctx, widget, patch)
}

func main() {
	// controller-runtime registers --kubeconfig itself (read by GetConfig, as is $KUBECONFIG).
	workers := flag.Int("workers", 16, "max concurrent reconciles")
	flag.Parse()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		panic(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000 // kubeop's client has no client-side rate limit in the bench either
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	})
	if err != nil {
		panic(err)
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		For(newWidget()).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(&reconciler{c: mgr.GetClient()}); err != nil {
		panic(err)
	}
	ctx := ctrl.SetupSignalHandler()
	start := time.Now()
	go func() {
		// The controller's two informers (GetInformer returns the same ones, once synced).
		for _, obj := range []client.Object{newWidget(), &corev1.ConfigMap{}} {
			informer, err := mgr.GetCache().GetInformer(ctx, obj)
			if err != nil {
				panic(err)
			}
			for !informer.HasSynced() { // GetInformer does not wait before the cache has started
				time.Sleep(10 * time.Millisecond)
			}
		}
		fmt.Printf("synced %.3f %.6f\n", time.Since(start).Seconds(), unixNow())
	}()
	fmt.Println("ready")
	if err := mgr.Start(ctx); err != nil {
		panic(err)
	}
}
