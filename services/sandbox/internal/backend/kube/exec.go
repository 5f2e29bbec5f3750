package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/thefold/thefold/pkg/errs"
)

// Executor runs argv in a container of a pod (pods/exec), with stdin (nil for none) and
// the output streamed to stdout and stderr as it comes. A command that ran and exited
// non-zero is an error carrying its code (k8s.io/client-go/util/exec.ExitError, as
// remotecommand reports it); any other error means the exec failed. Cancelling ctx stops the
// streams only: the process in the pod goes on until something kills it.
type Executor interface {
	Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// exitCode is the exit status an Executor's error carries, if it carries one.
func exitCode(err error) (int, bool) {
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitStatus(), true
	}
	return 0, false
}

// RESTConfig is the configuration of the API server: the kubeconfig file at path, else the
// in-cluster configuration of the pod the service runs in (its service account's token).
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		if _, serr := os.Stat(kubeconfig); serr != nil {
			return nil, fmt.Errorf("THEFOLD_SANDBOX_KUBECONFIG: %w: %w", serr, errs.ErrFailedPrecondition)
		}
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("THEFOLD_SANDBOX_KUBECONFIG %s: %w: %w", kubeconfig, err, errs.ErrFailedPrecondition)
		}
	} else if cfg, err = rest.InClusterConfig(); err != nil {
		return nil, fmt.Errorf("not running in a kubernetes pod (%v) and THEFOLD_SANDBOX_KUBECONFIG is not set: %w", err, errs.ErrFailedPrecondition)
	}
	// Making a sandbox polls its pod; the defaults (5/s, bursts of 10) would queue the
	// sandboxes of a busy service behind each other.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "thefold-sandbox"
	return cfg, nil
}

// Open is the backend on the cluster of cfg (RESTConfig), commands through pods/exec over
// WebSocket, or SPDY where the API server (or a proxy) does not upgrade to WebSocket.
func Open(ctx context.Context, restCfg *rest.Config, cfg Config) (*Kube, error) {
	core, err := corev1client.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w: %w", err, errs.ErrFailedPrecondition)
	}
	netv1, err := networkingv1client.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w: %w", err, errs.ErrFailedPrecondition)
	}
	return New(ctx, core, netv1, NewRESTExecutor(restCfg, core.RESTClient()), cfg)
}

// restExecutor is the Executor of a real cluster.
type restExecutor struct {
	cfg   *rest.Config
	rc    rest.Interface
	codec runtime.ParameterCodec
}

// NewRESTExecutor execs through the API server of cfg; rc is a core/v1 REST client of it.
func NewRESTExecutor(cfg *rest.Config, rc rest.Interface) Executor {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	return &restExecutor{cfg: cfg, rc: rc, codec: runtime.NewParameterCodec(scheme)}
}

func (e *restExecutor) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	u := e.rc.Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}, e.codec).URL()
	spdy, err := remotecommand.NewSPDYExecutor(e.cfg, "POST", u)
	if err != nil {
		return err
	}
	ws, err := remotecommand.NewWebSocketExecutor(e.cfg, "GET", u.String())
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}
