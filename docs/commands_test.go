package docs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The binaries under test, built once for every test of the package.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "plumbline-docs-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binDir+string(filepath.Separator), "./cmd/server", "./cmd/agent")
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// command is one command or subcommand (the words after the program name)
// with the flags its help prints.
type command struct {
	prog  string   // server or agent
	words []string // e.g. token create
	help  string
	flags map[string]bool
}

func (c *command) name() string { return strings.Join(append([]string{c.prog}, c.words...), " ") }

// help runs "prog words... -h" and returns what it printed, or "" when the
// program does not know the words.
func help(t *testing.T, prog string, words []string) string {
	t.Helper()
	bin := filepath.Join(binaries(t), prog) // before the timeout starts: the first call builds
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append(append([]string{}, words...), "-h")
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "PLUMBLINE_TOKEN=")
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s %s -h: no answer within 30s", prog, strings.Join(words, " "))
	}
	s := string(out)
	for _, unknown := range []string{"unexpected arguments", "unknown command", "unknown subcommand", "flag provided but not defined"} {
		if strings.Contains(s, unknown) {
			return ""
		}
	}
	return s
}

var (
	helpFlag    = regexp.MustCompile(`(?m)^\s+-{1,2}([A-Za-z0-9][\w.-]*)`)
	usageLine   = regexp.MustCompile(`(?m)^(?:usage: | {2,8})(server|agent) ((?:[a-z][a-z-]*(?:\|[a-z][a-z-]*)*(?: |$))+)`)
	commandList = regexp.MustCompile(`(?m)^  ([a-z][a-z-]*)\s{2,}\S`)
)

// Seeds that a top-level help may not list: the server's token, agent and
// ca commands (their own help lists their subcommands).
var seeds = map[string][][]string{
	"server": {{"token"}, {"agent"}, {"ca"}, {"inventory"}},
}

// commands walks each program's help: its usage lines and command lists
// name the subcommands, whose help is read in turn.
func commands(t *testing.T) map[string]*command {
	t.Helper()
	all := map[string]*command{}
	for _, prog := range []string{"server", "agent"} {
		queue := [][]string{nil}
		queue = append(queue, seeds[prog]...)
		for len(queue) > 0 {
			words := queue[0]
			queue = queue[1:]
			key := strings.Join(append([]string{prog}, words...), " ")
			if _, seen := all[key]; seen {
				continue
			}
			h := help(t, prog, words)
			if h == "" {
				if len(words) == 0 {
					t.Fatalf("%s -h printed nothing usable", prog)
				}
				continue
			}
			c := &command{prog: prog, words: words, help: h, flags: map[string]bool{}}
			for _, m := range helpFlag.FindAllStringSubmatch(h, -1) {
				c.flags[m[1]] = true
			}
			all[key] = c
			for _, sub := range subcommands(prog, words, h) {
				queue = append(queue, sub)
			}
		}
	}
	return all
}

// subcommands: the word sequences under words that help names.
func subcommands(prog string, words []string, h string) [][]string {
	var subs [][]string
	for _, m := range usageLine.FindAllStringSubmatch(h, -1) {
		if m[1] != prog {
			continue
		}
		seqs := [][]string{nil}
		for _, w := range strings.Fields(m[2]) {
			var next [][]string
			for _, alt := range strings.Split(w, "|") {
				for _, s := range seqs {
					next = append(next, append(append([]string{}, s...), alt))
				}
			}
			seqs = next
		}
		for _, s := range seqs {
			for i := 1; i <= len(s); i++ {
				subs = append(subs, s[:i])
			}
		}
	}
	if len(words) == 0 {
		if _, list, ok := strings.Cut(h, "commands:"); ok {
			for _, m := range commandList.FindAllStringSubmatch(list, -1) {
				subs = append(subs, []string{m[1]})
			}
		}
	}
	return subs
}

// Every flag that --help prints, for every command and subcommand of the
// server and the agent, is in the docs.
func TestEveryFlagDocumented(t *testing.T) {
	t.Parallel()
	text := allText(userDocs(t))
	cmds := commands(t)
	for _, want := range []string{"server", "server token create", "server agent revoke", "server inventory list", "agent inspect", "agent probe", "agent run", "agent enroll"} {
		if cmds[want] == nil {
			t.Errorf("the help walk did not find %q (found %v)", want, sortedKeys(cmds))
		}
	}
	for _, key := range sortedKeys(cmds) {
		c := cmds[key]
		for _, f := range sortedKeys(c.flags) {
			if f == "h" || f == "help" {
				continue
			}
			if !mentions(text, "--"+f) {
				t.Errorf("%s: flag --%s (in its --help) is not in the docs", c.name(), f)
			}
		}
	}
}

// A command line of the docs: where it is, and its words.
type docLine struct {
	where string
	words []string
}

var fenceOpen = regexp.MustCompile("^\\s*```\\s*(\\w*)")

// commandLines: the lines of fenced sh/console/shell/bash blocks that run
// the server, the agent or make, split into words up to the first shell
// operator.
func commandLines(t *testing.T) []docLine {
	t.Helper()
	var lines []docLine
	docs := userDocs(t)
	for _, name := range sortedKeys(docs) {
		in, lang := false, ""
		var cont strings.Builder
		contStart := 0
		for i, line := range strings.Split(docs[name], "\n") {
			if m := fenceOpen.FindStringSubmatch(line); m != nil {
				if in {
					in = false
				} else {
					in, lang = true, m[1]
				}
				continue
			}
			if !in || (lang != "sh" && lang != "console" && lang != "shell" && lang != "bash") {
				continue
			}
			if cont.Len() == 0 {
				contStart = i + 1
			}
			if strings.HasSuffix(strings.TrimRight(line, " "), "\\") {
				cont.WriteString(strings.TrimSuffix(strings.TrimRight(line, " "), "\\"))
				cont.WriteString(" ")
				continue
			}
			cont.WriteString(line)
			full := cont.String()
			cont.Reset()
			if words := commandWords(full, lang); words != nil {
				lines = append(lines, docLine{where: name + ":" + strconv.Itoa(contStart), words: words})
			}
		}
	}
	return lines
}

var programs = map[string]string{
	"plumbline-server": "server", "server": "server", "bin/server": "server", "./bin/server": "server",
	"plumbline-agent": "agent", "agent": "agent", "bin/agent": "agent", "./bin/agent": "agent",
	"/usr/bin/plumbline-server": "server", "/usr/bin/plumbline-agent": "agent",
	"make": "make",
}

// commandWords: the program (server, agent, make) and its arguments, or
// nil when the line runs something else.
func commandWords(line, lang string) []string {
	line = strings.TrimSpace(line)
	if lang == "console" {
		// Only "$ " is a prompt: "# " may be a comment in the output.
		if !strings.HasPrefix(line, "$ ") {
			return nil
		}
		line = line[2:]
	}
	fields := strings.Fields(line)
	// Leading sudo, runuser -u USER --, env assignments.
	for len(fields) > 0 {
		switch {
		case fields[0] == "sudo":
			fields = fields[1:]
		case fields[0] == "runuser" && len(fields) > 3 && fields[1] == "-u" && fields[3] == "--":
			fields = fields[4:]
		case regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(fields[0]):
			fields = fields[1:]
		default:
			goto done
		}
	}
done:
	if len(fields) == 0 {
		return nil
	}
	prog, ok := programs[fields[0]]
	if !ok {
		return nil
	}
	words := []string{prog}
	nested := 0 // inside $(...): another command's words
	for _, f := range fields[1:] {
		if nested > 0 || strings.HasPrefix(f, "$(") || strings.HasPrefix(f, "\"$(") {
			nested += strings.Count(f, "$(") - strings.Count(f, ")")
			if nested < 0 {
				nested = 0
			}
			words = append(words, "ARG")
			continue
		}
		if f == "|" || f == "||" || f == "&&" || f == ";" || f == "&" || strings.HasPrefix(f, "#") || strings.HasPrefix(f, ">") || strings.HasPrefix(f, "2>") || strings.HasPrefix(f, "<") {
			break
		}
		f = strings.TrimRight(f, ";")
		words = append(words, f)
	}
	return words
}

// Every command line in the docs parses: its subcommands exist and every
// flag it gives is one its --help prints; make targets exist.
func TestCommandLinesParse(t *testing.T) {
	t.Parallel()
	cmds := commands(t)
	makefile := readPage(t, filepath.Join("..", "Makefile"))
	lines := commandLines(t)
	if len(lines) < 10 {
		t.Fatalf("found only %d command lines in the docs", len(lines))
	}
	for _, l := range lines {
		if l.words[0] == "make" {
			for _, w := range l.words[1:] {
				if strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
					continue
				}
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(w) + `:`).MatchString(makefile) {
					t.Errorf("%s: make %s: no such target in the Makefile", l.where, w)
				}
			}
			continue
		}
		checkCommandLine(t, cmds, l)
	}
}

func checkCommandLine(t *testing.T, cmds map[string]*command, l docLine) {
	t.Helper()
	prog, args := l.words[0], l.words[1:]
	c := cmds[prog]
	i := 0
	for ; i < len(args); i++ {
		next := cmds[c.name()+" "+args[i]]
		if next == nil {
			break
		}
		c = next
	}
	if strings.Contains(c.help, "Windows only") {
		return // its flags exist only in the Windows build
	}
	if i < len(args) && len(c.flags) == 0 && c.prog == "agent" && len(c.words) == 0 && !strings.HasPrefix(args[i], "-") {
		t.Errorf("%s: %s %s: no such command", l.where, prog, args[i])
		return
	}
	if c.prog == "server" && len(c.words) == 0 && i < len(args) && !strings.HasPrefix(args[i], "-") {
		t.Errorf("%s: server %s: no such command", l.where, args[i])
		return
	}
	for _, a := range args[i:] {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || strings.HasPrefix(a, "-…") || strings.HasPrefix(a, "--…") {
			continue
		}
		name := strings.TrimLeft(a, "-")
		name, _, _ = strings.Cut(name, "=")
		name = strings.Trim(name, "[]()…,`'\"")
		if name == "" || name == "h" || name == "help" {
			continue
		}
		if !c.flags[name] {
			t.Errorf("%s: %s: flag --%s is not a flag of %q (its --help: %v)", l.where, strings.Join(l.words, " "), name, c.name(), sortedKeys(c.flags))
		}
	}
}

// The walk finds the subcommands the programs' help names.
func TestSubcommandsFromHelp(t *testing.T) {
	t.Parallel()
	got := subcommands("server", []string{"token"}, "usage: server token create [--ttl 24h]\n       server token list|revoke ID\n       server agent list|revoke ID (--config FILE)\n")
	var keys []string
	for _, s := range got {
		keys = append(keys, strings.Join(s, " "))
	}
	want := "token token create token token list token token revoke agent agent list agent agent revoke"
	if strings.Join(keys, " ") != want {
		t.Errorf("subcommands = %q, want %q", strings.Join(keys, " "), want)
	}
	words := commandWords("$ sudo PLUMBLINE_X=1 plumbline-server token create --ttl 1h --labels a=b | tee x", "console")
	if strings.Join(words, " ") != "server token create --ttl 1h --labels a=b" {
		t.Errorf("commandWords = %q", words)
	}
	words = commandWords("plumbline-server ca init --dir /etc/plumbline/pki --name $(hostname -f) --ip 10.0.0.1", "sh")
	if strings.Join(words, " ") != "server ca init --dir /etc/plumbline/pki --name ARG ARG --ip 10.0.0.1" {
		t.Errorf("commandWords($(...)) = %q", words)
	}
	if w := commandWords("# agent config (agent run --config FILE --check accepts it as it is):", "console"); w != nil {
		t.Errorf("commandWords(console output) = %q, want nil", w)
	}
	if w := commandWords("curl -s http://x", "sh"); w != nil {
		t.Errorf("commandWords(curl) = %q, want nil", w)
	}
}
