package command

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	const usage = "usage: prog <command>\n"
	var got []string // the arguments the subcommand was given
	subs := map[string]Func{
		"echo": func(_ context.Context, args []string, stdout, _ io.Writer) int {
			got = args
			io.WriteString(stdout, strings.Join(args, " "))
			return 7
		},
	}
	tests := []struct {
		name               string
		args               []string
		code               int
		stdout, stderr     string
		subcommandReceived []string
	}{
		{"no arguments", nil, 2, "", usage, nil},
		{"subcommand", []string{"echo", "a", "-b"}, 7, "a -b", "", []string{"a", "-b"}},
		{"help", []string{"help"}, 0, usage, "", nil},
		{"-h", []string{"-h"}, 0, usage, "", nil},
		{"--help", []string{"--help", "echo"}, 0, usage, "", nil},
		{"unknown", []string{"ehco"}, 2, "", "prog: unknown command \"ehco\"\n\n" + usage, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			var stdout, stderr bytes.Buffer
			code := Dispatch(t.Context(), "prog", usage, subs, tt.args, &stdout, &stderr)
			if code != tt.code || stdout.String() != tt.stdout || stderr.String() != tt.stderr {
				t.Errorf("Dispatch(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
			if strings.Join(got, "\x00") != strings.Join(tt.subcommandReceived, "\x00") {
				t.Errorf("Dispatch(%q): the subcommand got %q, want %q", tt.args, got, tt.subcommandReceived)
			}
		})
	}
}

func TestDispatchPassesContext(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(t.Context(), key{}, "v")
	var seen any
	Dispatch(ctx, "prog", "", map[string]Func{"x": func(ctx context.Context, _ []string, _, _ io.Writer) int {
		seen = ctx.Value(key{})
		return 0
	}}, []string{"x"}, io.Discard, io.Discard)
	if seen != "v" {
		t.Errorf("the subcommand's context carries %v, want the caller's (v)", seen)
	}
}

func TestContextStop(t *testing.T) {
	ctx, stop := Context()
	if ctx.Err() != nil {
		t.Fatalf("Context() is done before any signal: %v", ctx.Err())
	}
	stop()
	if ctx.Err() == nil {
		t.Error("after stop the context is not done")
	}
}
