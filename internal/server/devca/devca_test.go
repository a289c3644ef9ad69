package devca

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestCreateLoadIssue(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ca")
	if _, err := Load(dir); err == nil {
		t.Fatal("Load of an empty directory succeeded")
	}
	ca, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Create(dir); err == nil {
		t.Error("Create over an existing CA succeeded")
	}
	if runtime.GOOS != "windows" {
		if fi, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("CA key mode %v, %v; want 0600", fi.Mode().Perm(), err)
		}
	}
	loaded, created, err := LoadOrCreate(dir)
	if err != nil || created || !loaded.Cert.Equal(ca.Cert) {
		t.Fatalf("LoadOrCreate of an existing CA = %v, created %v, %v", loaded, created, err)
	}

	srv, err := loaded.IssueServer("localhost", "127.0.0.1", "::1", "db.example")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"localhost", "127.0.0.1", "::1", "db.example"} {
		if err := srv.Cert.VerifyHostname(h); err != nil {
			t.Errorf("server certificate does not cover %s: %v", h, err)
		}
	}
	if _, err := srv.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("server certificate does not verify against the CA: %v", err)
	}
	agent, err := ca.IssueAgent("db-07")
	if err != nil {
		t.Fatal(err)
	}
	if agent.Cert.Subject.CommonName != "db-07" || len(agent.Cert.URIs) != 1 || agent.Cert.URIs[0].String() != "plumbline://agent/db-07" {
		t.Errorf("agent certificate names CN %q, URIs %v", agent.Cert.Subject.CommonName, agent.Cert.URIs)
	}
	if _, err := agent.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("agent certificate does not verify as a client certificate: %v", err)
	}
	if _, err := agent.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("agent certificate verifies as a server certificate")
	}
	if tc := agent.TLSCertificate(); tc.Leaf == nil || tc.PrivateKey == nil {
		t.Error("TLSCertificate() without leaf or key")
	}
	if d := time.Until(agent.Cert.NotAfter); d < 365*24*time.Hour {
		t.Errorf("agent certificate valid for %v only", d)
	}

	cp, kp := filepath.Join(t.TempDir(), "a.crt"), filepath.Join(t.TempDir(), "a.key")
	if err := agent.WriteFiles(cp, kp); err != nil {
		t.Fatal(err)
	}
	back, err := ca.LoadLeaf(cp, kp, x509.ExtKeyUsageClientAuth)
	if err != nil || !back.Cert.Equal(agent.Cert) {
		t.Fatalf("LoadLeaf = %v, %v", back, err)
	}
	other, _ := Create(filepath.Join(t.TempDir(), "other"))
	if _, err := other.LoadLeaf(cp, kp, x509.ExtKeyUsageClientAuth); err == nil {
		t.Error("LoadLeaf accepted a certificate of another CA")
	}
	if _, err := ca.IssueAgent(""); err == nil {
		t.Error("IssueAgent(\"\") succeeded")
	}
}
