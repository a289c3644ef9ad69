package geometry

import (
	"fmt"
	"strings"
)

// windowsKernel is Host.kernel on Windows: major.minor.build, and .UBR
// (the update build revision, which moves with each cumulative update)
// when the registry has it: 10.0.20348.2340. Empty without a version.
func windowsKernel(major, minor, build, ubr uint32, hasUBR bool) string {
	if major == 0 {
		return ""
	}
	if !hasUBR {
		return fmt.Sprintf("%d.%d.%d", major, minor, build)
	}
	return fmt.Sprintf("%d.%d.%d.%d", major, minor, build, ubr)
}

// normalizeMachineGUID is Host.machine_id from MachineGuid: lower case,
// no braces, no blanks.
func normalizeMachineGUID(s string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(s), "{}"))
}
