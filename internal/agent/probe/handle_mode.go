package probe

// Windows reports a handle's caching mode in FILE_MODE_INFORMATION
// (NtQueryInformationFile, FileModeInformation). A probe result claims
// cache_bypass only when that answer confirms FILE_FLAG_NO_BUFFERING took
// effect: the flag asked for at CreateFile is a request, not a proof.
// Declared here, OS-neutral, so the decision is tested on every platform.
const (
	fileModeInformationClass   = 16         // FILE_INFORMATION_CLASS FileModeInformation
	fileWriteThrough           = 0x00000002 // FILE_WRITE_THROUGH
	fileNoIntermediateBuffered = 0x00000008 // FILE_NO_INTERMEDIATE_BUFFERING
)

// handleBypassesCache reports whether a FileModeInformation answer (mode,
// or the error of asking) confirms that the handle bypasses the cache.
func handleBypassesCache(mode uint32, queryErr error) bool {
	return queryErr == nil && mode&fileNoIntermediateBuffered != 0
}
