package probe

import "path/filepath"

// joinPath names the probe file for messages and results.
func joinPath(dir, name string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Join(dir, name)
}
