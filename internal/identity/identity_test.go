package identity_test

import (
	"net/url"
	"path/filepath"
	"testing"

	"github.com/plumbline/plumbline/internal/identity"
	"github.com/plumbline/plumbline/internal/server/devca"
)

func TestFromCertificate(t *testing.T) {
	t.Parallel()
	ca, err := devca.Create(filepath.Join(t.TempDir(), "ca"))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueAgent("db-01.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if id, err := identity.FromCertificate(leaf.Cert); err != nil || id != "db-01.example.com" {
		t.Errorf("FromCertificate(devca agent) = %q, %v", id, err)
	}
	tests := []struct {
		name string
		cn   string
		uris []string
		want string // "" = error
	}{
		{"CN only", "db1", nil, "db1"},
		{"URI only", "", []string{"plumbline://agent/db2"}, "db2"},
		{"both agree", "db3", []string{"plumbline://agent/db3", "spiffe://x/y"}, "db3"},
		{"disagree", "db4", []string{"plumbline://agent/other"}, ""},
		{"two URIs", "", []string{"plumbline://agent/a", "plumbline://agent/b"}, ""},
		{"nothing", "", nil, ""},
		{"space in CN", "db 5", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := *leaf.Cert
			c.Subject.CommonName = tt.cn
			c.URIs = nil
			for _, u := range tt.uris {
				pu, err := url.Parse(u)
				if err != nil {
					t.Fatal(err)
				}
				c.URIs = append(c.URIs, pu)
			}
			got, err := identity.FromCertificate(&c)
			if tt.want == "" {
				if err == nil {
					t.Errorf("FromCertificate() = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("FromCertificate() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
