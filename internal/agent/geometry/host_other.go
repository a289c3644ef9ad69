//go:build !windows

package geometry

import plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"

// osHostFacts adds what only the OS's own API knows; on Linux and the
// rest, procfs and /etc said it all.
func osHostFacts(*plumblinev1.Host) {}
