package ingest

import (
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/plumbline/plumbline/internal/server/store"
)

// The server keeps the validity of the client certificate each agent
// presented at its Hello (the exporter's certificate expiry gauges read
// it); an agent of an insecure server has none.
func TestHelloRecordsCertificateValidity(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, dsn string) {
		e := startServer(t, dsn, newPKI(t), Options{})
		leaf, err := e.pki.ca.IssueAgent("db1")
		if err != nil {
			t.Fatal(err)
		}
		c := dial(t, e.addr, credentials.NewTLS(clientTLS(e.pki.ca.Pool(), leaf)))
		hello(t, c, "db1")
		a := host(t, e.store, "db1")
		if !a.CertNotAfter.Equal(leaf.Cert.NotAfter) || !a.CertNotBefore.Equal(leaf.Cert.NotBefore) {
			t.Fatalf("certificate validity = %v – %v, want the presented one's %v – %v",
				a.CertNotBefore, a.CertNotAfter, leaf.Cert.NotBefore, leaf.Cert.NotAfter)
		}
	})
}

func TestInsecureHelloHasNoCertificate(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), nil, Options{Insecure: true})
	hello(t, dial(t, e.addr, insecure.NewCredentials()), "db1")
	if a := host(t, e.store, "db1"); !a.CertNotAfter.IsZero() || !a.CertNotBefore.IsZero() {
		t.Fatalf("insecure agent: certificate validity %v – %v, want none", a.CertNotBefore, a.CertNotAfter)
	}
}

// host is the registered agent id.
func host(t *testing.T, st *store.Store, id string) store.Agent {
	t.Helper()
	hosts, err := st.ListHosts(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range hosts {
		if a.ID == id {
			return a
		}
	}
	t.Fatalf("agent %q not registered (hosts %v)", id, hosts)
	return store.Agent{}
}
