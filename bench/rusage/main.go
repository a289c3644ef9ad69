//go:build unix

// Command rusage runs a command and writes its CPU time and peak RSS, from
// wait4's rusage at microsecond resolution (GNU time prints 10 ms steps,
// too coarse for 1000 paced ops), to the file named by -o:
//
//	rusage -o FILE cmd args...   →  FILE: "<user+sys seconds> <max RSS KiB>"
//
// It is a benchmark helper only; nothing in the agent uses it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	out := flag.String("o", "", "file to write \"cpu_seconds maxrss_kib\" to")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: rusage -o FILE cmd args...")
		os.Exit(2)
	}
	cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "rusage:", err)
		os.Exit(1)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "rusage: no rusage on this OS")
		os.Exit(1)
	}
	cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	if werr := os.WriteFile(*out, fmt.Appendf(nil, "%.6f %d\n", cpu, ru.Maxrss), 0o644); werr != nil {
		fmt.Fprintln(os.Stderr, "rusage:", werr)
		os.Exit(1)
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
