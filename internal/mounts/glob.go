// Package mounts reads mount tables (/proc/<pid>/mountinfo) and matches
// mount point globs. It is shared: discovery, the agent's configuration,
// central policy's validation and the server's data-directory check use
// it, and it links no discovery code.
package mounts

import (
	"path"
	"strings"
)

// Mount point globs, one rule for discovery's include/exclude selectors
// (config's mount_points) and the agent's probe schedules (probes[].mount_point).
// A glob is path.Match syntax over an absolute path: /data* on Linux; on
// Windows a drive letter and a forward slash, D:/ or C:/MountPoints/*
// (the native form needs its backslashes escaped: D:\\SQL*).

// ValidGlob reports whether g is a mount point glob: valid path.Match
// syntax, and absolute (/... or a drive letter, D:/ or D:\\).
func ValidGlob(g string) bool {
	if _, err := path.Match(g, "/"); err != nil {
		return false
	}
	return strings.HasPrefix(g, "/") || hasDriveLetter(g) && len(g) >= 3 && (g[2] == '/' || g[2] == '\\')
}

// MatchGlob reports whether the mount point mp matches glob g. A
// Linux mount point is matched with path.Match as it is. A Windows mount
// point (D:\, C:\MountPoints\Data\) is also tried with forward slashes and
// without its trailing one, so that D:/ matches D:\ and
// C:/MountPoints/* matches C:\MountPoints\Data\; drive letters match in
// either case.
func MatchGlob(g, mp string) bool {
	if !hasDriveLetter(mp) {
		ok, _ := path.Match(g, mp)
		return ok
	}
	slash := strings.ReplaceAll(mp, `\`, "/")
	for _, cand := range []string{mp, slash, strings.TrimSuffix(slash, "/")} {
		if ok, _ := path.Match(g, cand); ok {
			return true
		}
		if hasDriveLetter(g) {
			if ok, _ := path.Match(strings.ToUpper(g[:1])+g[1:], strings.ToUpper(cand[:1])+cand[1:]); ok {
				return true
			}
		}
	}
	return false
}

// hasDriveLetter reports whether p starts with a drive letter and a colon.
func hasDriveLetter(p string) bool {
	return len(p) >= 2 && p[1] == ':' && (p[0]|0x20 >= 'a' && p[0]|0x20 <= 'z')
}
