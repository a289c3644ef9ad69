package server

import (
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/server/config"
)

var certExpiryDesc = prometheus.NewDesc("plumbline_server_certificate_expiry_timestamp_seconds",
	"When the server's gRPC TLS certificate (grpc.tls.cert_file, read at each scrape as the listener re-reads it) expires (Unix time). Renew it before: server ca renew, or your PKI. Absent with grpc.insecure.",
	nil, nil)

// certExpiry is the collector of the server certificate's expiry.
type certExpiry struct{ file string }

// newCertExpiry is the collector for cfg's server certificate (none with
// grpc.insecure).
func newCertExpiry(cfg config.Config) certExpiry {
	if cfg.GRPC.Insecure {
		return certExpiry{}
	}
	return certExpiry{cfg.GRPC.TLS.CertFile}
}

// Describe implements prometheus.Collector.
func (c certExpiry) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

// Collect implements prometheus.Collector: nothing when there is no
// certificate file or it does not parse (the listener says why).
func (c certExpiry) Collect(ch chan<- prometheus.Metric) {
	if c.file == "" {
		return
	}
	b, err := os.ReadFile(c.file)
	if err != nil {
		return
	}
	certs, err := enroll.ParseCertsPEM(b)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(certs[0].NotAfter.Unix()))
}
