package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/devca"
	"github.com/plumbline/plumbline/internal/server/ingest"
	"github.com/plumbline/plumbline/internal/server/store"
)

// ErrEnrollmentOff: the configuration names no enrollment CA and the data
// directory holds no dev CA.
var ErrEnrollmentOff = errors.New(`enrollment is off: set enrollment.ca_cert_file and ca_key_file (docs/install.md: plumbline-server ca init), or run server --dev`)

// EnrollmentFiles are the enrollment authority's files for cfg: the
// configured CA, or the dev CA and server certificate under the data
// directory (what `server --dev` lays out).
func EnrollmentFiles(cfg config.Config) (authority.Files, error) {
	e, t := cfg.Enrollment, cfg.GRPC.TLS
	if e.CACertFile != "" {
		bundle := e.TrustBundleFile
		if bundle == "" {
			bundle = t.ClientCAFile
		}
		return authority.Files{CACert: e.CACertFile, CAKey: e.CAKeyFile, TrustBundle: bundle, ServerCert: t.CertFile, ClientCA: t.ClientCAFile}, nil
	}
	l, err := newDevLayout(cfg.DataDir)
	if err != nil {
		return authority.Files{}, err
	}
	ca := filepath.Join(l.caDir, devca.CertFile)
	if _, err := os.Stat(ca); err != nil {
		return authority.Files{}, ErrEnrollmentOff
	}
	return authority.Files{CACert: ca, CAKey: filepath.Join(l.caDir, devca.KeyFile), TrustBundle: ca, ServerCert: l.serverCert, ClientCA: ca}, nil
}

// enrollment is the server's enrollment authority; the zero value is off.
type enrollment struct{ a *authority.Authority }

// newEnrollment loads the authority when enrollment is on, and opens the
// gRPC listener's TLS to clients without a certificate (for the public
// enrollment methods only: ingest refuses every other call without one)
// and to the authority's revocation check at the handshake.
func newEnrollment(cfg config.Config, st *store.Store, tlsConf *tls.Config, logger *slog.Logger) (enrollment, error) {
	if !cfg.EnrollmentEnabled() || tlsConf == nil {
		return enrollment{}, nil
	}
	files, err := EnrollmentFiles(cfg)
	if err != nil {
		return enrollment{}, err
	}
	ca, err := authority.LoadCA(files)
	if err != nil {
		return enrollment{}, fmt.Errorf("enrollment: %w", err)
	}
	a := authority.New(ca, st, authority.Options{
		CertTTL: cfg.Enrollment.CertTTL, Rate: cfg.Enrollment.RateLimit.CallsPerSecond, Burst: cfg.Enrollment.RateLimit.Burst,
		Logger: logger.With("component", "enrollment"),
	})
	tlsConf.ClientAuth = tls.VerifyClientCertIfGiven
	tlsConf.VerifyConnection = a.VerifyConnection
	logger.Info("enrollment on", "ca", files.CACert, "ca_hash", a.Pin(), "cert_ttl", cfg.Enrollment.CertTTL)
	return enrollment{a}, nil
}

// ingestOptions adds the public methods and the per-call check.
func (e enrollment) ingestOptions(o ingest.Options) ingest.Options {
	if e.a != nil {
		o.PublicMethods = authority.PublicMethods()
		o.Authorize = e.a.Authorize
	}
	return o
}

// readyChecks: a failing enrollment lookup makes the server not ready.
func (e enrollment) readyChecks() []func(context.Context) error {
	if e.a == nil {
		return nil
	}
	return []func(context.Context) error{e.a.Ready}
}

// collectors are the authority's metrics (none when enrollment is off).
func (e enrollment) collectors() []prometheus.Collector {
	if e.a == nil {
		return nil
	}
	return []prometheus.Collector{e.a.Collector(), e.a.LookupCollector()}
}

func (e enrollment) register(gs *grpc.Server) {
	if e.a != nil {
		e.a.Register(gs)
	}
}
