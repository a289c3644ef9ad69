package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOK   bool
		wantN    int
		wantOut  string // a part of what the flag package printed; "" none
	}{
		{name: "no args", args: nil, wantCode: exitOK, wantOK: true},
		{name: "a flag", args: []string{"-n", "7"}, wantCode: exitOK, wantOK: true, wantN: 7},
		{name: "-h", args: []string{"-h"}, wantCode: exitOK, wantOK: false, wantOut: "Usage of test"},
		{name: "--help", args: []string{"--help"}, wantCode: exitOK, wantOK: false, wantOut: "Usage of test"},
		{name: "unknown flag", args: []string{"--nope"}, wantCode: exitUsage, wantOK: false, wantOut: "flag provided but not defined: -nope"},
		{name: "bad value", args: []string{"-n", "seven"}, wantCode: exitUsage, wantOK: false, wantOut: `invalid value "seven" for flag -n`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			fl := flag.NewFlagSet("test", flag.ContinueOnError)
			fl.SetOutput(&out)
			n := fl.Int("n", 0, "a number")
			code, ok := parseFlags(fl, tc.args)
			if code != tc.wantCode || ok != tc.wantOK {
				t.Errorf("parseFlags(%q) = %d, %v, want %d, %v", tc.args, code, ok, tc.wantCode, tc.wantOK)
			}
			if *n != tc.wantN {
				t.Errorf("parseFlags(%q): -n = %d, want %d", tc.args, *n, tc.wantN)
			}
			if tc.wantOut == "" && out.Len() > 0 || !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("parseFlags(%q) printed %q, want it to contain %q", tc.args, out.String(), tc.wantOut)
			}
		})
	}
}
