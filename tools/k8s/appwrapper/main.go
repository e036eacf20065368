// Command appwrapper runs the AppWrapper controller and its admission webhooks as a local
// process of the test stack: the same packages as the upstream manager, configured by flags
// rather than by a ConfigMap, with the webhook server on a port and host the caller chooses
// (upstream's listens on :9443 of every interface) and no metrics server.
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"github.com/project-codeflare/appwrapper/pkg/config"
	"github.com/project-codeflare/appwrapper/pkg/controller"
)

func main() {
	namespace := flag.String("namespace", "appwrapper-system", "where the webhook's Secret is")
	webhookHost := flag.String("webhook-host", "127.0.0.1", "the webhook server's address")
	webhookPort := flag.Int("webhook-port", 9443, "the webhook server's port")
	certDir := flag.String("cert-dir", "", "where the webhook's serving certificate is written")
	healthAddress := flag.String("health-probe-bind-address", "127.0.0.1:8081", "/healthz and /readyz")
	options := zap.Options{}
	options.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&options)))
	log := ctrl.Log.WithName("appwrapper")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(awv1beta2.AddToScheme(scheme))

	appWrapper := config.NewAppWrapperConfig()
	// No Autopilot here: its node monitor reads GPU health labels no test node carries.
	appWrapper.Autopilot.MonitorNodes = false
	certificates := config.NewCertManagementConfig(*namespace)
	certificates.CertificateDir = *certDir
	if err := config.ValidateAppWrapperConfig(appWrapper); err != nil {
		fail(log, err, "invalid configuration")
	}

	manager, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: *healthAddress,
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    *webhookHost,
			Port:    *webhookPort,
			CertDir: *certDir,
		}),
	})
	if err != nil {
		fail(log, err, "no manager")
	}
	certsReady := make(chan struct{})
	if err := controller.SetupCertManagement(manager, certificates, certsReady); err != nil {
		fail(log, err, "no certificate rotation")
	}
	go func() {
		<-certsReady
		if err := controller.SetupWebhooks(manager, appWrapper); err != nil {
			fail(log, err, "no webhooks")
		}
		if err := controller.SetupControllers(manager, appWrapper); err != nil {
			fail(log, err, "no controllers")
		}
	}()
	if err := controller.SetupProbeEndpoints(manager, certsReady); err != nil {
		fail(log, err, "no probes")
	}
	if err := manager.Start(ctrl.SetupSignalHandler()); err != nil {
		fail(log, err, "stopped")
	}
}

func fail(log interface{ Error(error, string, ...any) }, err error, what string) {
	log.Error(err, what)
	os.Exit(1)
}
