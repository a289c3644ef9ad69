package geometry

import (
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// Registry keys of the host facts. Both are read from the 64-bit view, so
// that a 32-bit agent on 64-bit Windows is not redirected to WOW6432Node
// (which has no MachineGuid).
const (
	regCryptography     = `SOFTWARE\Microsoft\Cryptography`              // MachineGuid
	regWindowsNTVersion = `SOFTWARE\Microsoft\Windows NT\CurrentVersion` // UBR
)

// osHostFacts sets kernel to the Windows version and build
// (major.minor.build.UBR from RtlGetVersion, which no compatibility shim
// rewrites, and the registry's update build revision) and machine_id to
// the installation's MachineGuid. procfs and /etc mean nothing here.
func osHostFacts(h *plumblinev1.Host) {
	v := windows.RtlGetVersion()
	var ubr uint64
	var hasUBR bool
	if k, err := registry.OpenKey(registry.LOCAL_MACHINE, regWindowsNTVersion, registry.QUERY_VALUE|registry.WOW64_64KEY); err == nil {
		ubr, _, err = k.GetIntegerValue("UBR")
		hasUBR = err == nil
		k.Close()
	}
	h.Kernel = windowsKernel(v.MajorVersion, v.MinorVersion, v.BuildNumber, uint32(ubr), hasUBR)

	h.MachineId = ""
	if k, err := registry.OpenKey(registry.LOCAL_MACHINE, regCryptography, registry.QUERY_VALUE|registry.WOW64_64KEY); err == nil {
		if s, _, err := k.GetStringValue("MachineGuid"); err == nil {
			h.MachineId = normalizeMachineGUID(s)
		}
		k.Close()
	}
}
