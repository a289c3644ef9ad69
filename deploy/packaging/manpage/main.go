// Command manpage writes a man page (roff) for a Plumbline binary from what
// the binary itself prints for --help and for each command's --help, so the
// packaged page says what the installed binary does. scripts/packages.sh
// runs it with a binary built for the machine it runs on (the help text is
// the same on every architecture).
//
//	manpage -name plumbline-agent -prog agent -section 8 -version V -date 2026-01-02 \
//	  -summary "..." [-commands token,inventory] -o OUT BINARY
//
// Commands are those listed under "commands:" in the top-level help plus
// -commands; a command whose help does not start with "usage:" (such as a
// Windows-only one) or repeats another's is left out.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

type page struct {
	name, prog, section, version, date, summary string
	description, files, seeAlso                 string
	commands                                    []string
}

func main() {
	var p page
	var commands, out string
	flag.StringVar(&p.name, "name", "", "the installed program name (plumbline-agent)")
	flag.StringVar(&p.prog, "prog", "", "the name the binary calls itself in its help (agent)")
	flag.StringVar(&p.section, "section", "8", "manual section")
	flag.StringVar(&p.version, "version", "", "the package version")
	flag.StringVar(&p.date, "date", "", "the page's date, YYYY-MM-DD")
	flag.StringVar(&p.summary, "summary", "", "one line for NAME")
	flag.StringVar(&p.description, "description", "", "the DESCRIPTION paragraph")
	flag.StringVar(&p.files, "files", "", "FILES entries, PATH=what;PATH=what")
	flag.StringVar(&p.seeAlso, "see-also", "", "SEE ALSO, e.g. plumbline-server(8), systemctl(1)")
	flag.StringVar(&commands, "commands", "", "more commands to document, comma-separated")
	flag.StringVar(&out, "o", "", "output file (default: standard output)")
	flag.Parse()
	if flag.NArg() != 1 || p.name == "" || p.prog == "" || p.version == "" {
		fmt.Fprintln(os.Stderr, "usage: manpage -name NAME -prog PROG -version V [flags] BINARY")
		os.Exit(2)
	}
	if p.date == "" {
		p.date = time.Now().UTC().Format(time.DateOnly)
	}
	if commands != "" {
		p.commands = strings.Split(commands, ",")
	}
	var buf bytes.Buffer
	if err := p.write(context.Background(), &buf, flag.Arg(0)); err != nil {
		fmt.Fprintf(os.Stderr, "manpage: %v\n", err)
		os.Exit(1)
	}
	var err error
	if out != "" {
		err = os.WriteFile(out, buf.Bytes(), 0o644)
	} else {
		_, err = os.Stdout.Write(buf.Bytes())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "manpage: %v\n", err)
		os.Exit(1)
	}
}

// help runs BINARY ARGS... --help; the help goes to stdout or stderr.
func help(ctx context.Context, bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--help")...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	b, _ := cmd.CombinedOutput() // some programs exit 2 after -h; the text is what counts
	return strings.TrimRight(string(b), "\n")
}

var commandLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)  +\S`)

// listed returns the commands under "commands:" in a top-level help.
func listed(top string) []string {
	var cmds []string
	in := false
	for _, l := range strings.Split(top, "\n") {
		switch {
		case strings.TrimSpace(l) == "commands:":
			in = true
		case in && commandLine.MatchString(l):
			cmds = append(cmds, commandLine.FindStringSubmatch(l)[1])
		case in && strings.TrimSpace(l) == "":
			in = false
		}
	}
	return cmds
}

func (p page) write(ctx context.Context, w *bytes.Buffer, bin string) error {
	top := help(ctx, bin)
	if !strings.HasPrefix(top, "usage:") {
		return fmt.Errorf("%s --help: no usage: %q", bin, top)
	}
	fmt.Fprintf(w, ".TH %s %s %q %q %q\n", strings.ToUpper(p.name), p.section, p.date, "plumbline "+p.version, "System Administration")
	fmt.Fprintf(w, ".SH NAME\n%s \\- %s\n", p.name, escape(p.summary))
	fmt.Fprintf(w, ".SH SYNOPSIS\n.nf\n%s\n.fi\n", p.verbatim(top))
	if p.description != "" {
		fmt.Fprintf(w, ".SH DESCRIPTION\n%s\n", escape(p.description))
	}
	seen := map[string]bool{top: true}
	var sections []string
	for _, c := range append(listed(top), p.commands...) {
		h := help(ctx, bin, c)
		if !strings.HasPrefix(h, "usage:") || seen[h] {
			continue
		}
		seen[h] = true
		sections = append(sections, fmt.Sprintf(".SS \"%s %s\"\n.nf\n%s\n.fi\n", p.name, c, p.verbatim(h)))
	}
	if len(sections) > 0 {
		fmt.Fprintf(w, ".SH COMMANDS\n%s", strings.Join(sections, ""))
	}
	if p.files != "" {
		w.WriteString(".SH FILES\n")
		for _, f := range strings.Split(p.files, ";") {
			path, what, _ := strings.Cut(f, "=")
			fmt.Fprintf(w, ".TP\n.I %s\n%s\n", escape(path), escape(what))
		}
	}
	if p.seeAlso != "" {
		fmt.Fprintf(w, ".SH SEE ALSO\n%s\n", escape(p.seeAlso))
	}
	return nil
}

// verbatim prepares help text for a no-fill block: the program's own name
// at the start of a command line becomes the installed name, and roff's
// special characters are escaped.
func (p page) verbatim(text string) string {
	// "usage: agent ...", its continuation lines and the indented command
	// lines of a subcommand list; a flag's description (indented with a
	// tab, as package flag prints it) is prose and keeps its words.
	self := regexp.MustCompile(`^(usage: +| +)` + regexp.QuoteMeta(p.prog) + `( |$)`)
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.Contains(l, "\t") {
			l = self.ReplaceAllString(l, "${1}"+p.name+"${2}")
		}
		l = strings.ReplaceAll(l, "\t", "        ")
		lines = append(lines, escape(l))
	}
	return strings.Join(lines, "\n")
}

// escape makes text safe as roff input: backslashes, a leading dot or
// apostrophe (a request), and minus signs meant as such.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
