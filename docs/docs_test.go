package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/plumbline/plumbline/internal/metricsource"
)

// The user documentation: README.md and every page under docs/ except the
// maintainers' pages under docs/dev/.
func userDocs(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	add := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs[filepath.ToSlash(path)] = string(b)
	}
	add(filepath.Join("..", "README.md"))
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path == "dev" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			add(path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func allText(docs map[string]string) string {
	var b strings.Builder
	for _, name := range sortedKeys(docs) {
		b.WriteString(docs[name])
		b.WriteString("\n")
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func readPage(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mentions reports whether text names word as a whole word: not as a part
// of a longer identifier, metric name, flag or path.
func mentions(text, word string) bool {
	re := regexp.MustCompile(`(^|[^\w.-])` + regexp.QuoteMeta(word) + `($|[^\w.-]|\.($|[^\w]))`)
	return re.MatchString(text)
}

var (
	issueRef   = regexp.MustCompile(`(^|[^\w&/])#\d+\b`)
	issueWord  = regexp.MustCompile(`(?i)\bissues? \d+`)
	testName   = regexp.MustCompile(`\bTest[A-Z]\w+`)
	commitHash = regexp.MustCompile(`\b[0-9a-f]{40}\b`)
)

// topLevelWord: what the maintainers' check of the top-level pages
// (docs/*.md) finds, case-insensitively: an issue number ("issue 12",
// "x#12") or a word that begins with "test" and goes on for two letters or
// more — a test's name (TestFoo), but also "tested", "testing" and
// "testdata" paths, which those pages say otherwise ("checked", "covered by
// a test", the recording's name) or leave to docs/dev/.
var topLevelWord = regexp.MustCompile(`(?i)\b(issue|#) ?[0-9]{1,3}\b|test[a-z][a-z]+\b`)

// User docs are written for users: no issue numbers, test names or commit
// hashes (docs/dev/ is the maintainers' and may have them). A figure's
// reproduction that runs a test by name (go test -run Name) is in
// docs/dev/reproduce.md, linked from the page.
func TestNoNotebookReferences(t *testing.T) {
	t.Parallel()
	docs := userDocs(t)
	for _, name := range sortedKeys(docs) {
		checks := []struct {
			what string
			re   *regexp.Regexp
		}{{"an issue number", issueRef}, {"an issue number", issueWord}, {"a test name", testName}, {"a commit hash", commitHash}}
		if !strings.Contains(name, "/") {
			checks = append(checks, struct {
				what string
				re   *regexp.Regexp
			}{"an issue number or a test's word", topLevelWord})
		}
		for i, line := range strings.Split(docs[name], "\n") {
			for _, c := range checks {
				if m := c.re.FindString(line); m != "" {
					t.Errorf("%s:%d: %s (%q) in user docs: %s", name, i+1, c.what, strings.TrimSpace(m), strings.TrimSpace(line))
				}
			}
		}
		for _, r := range testRuns(docs[name]) {
			t.Errorf("%s:%d: go test -run %s names a test; user docs give a benchmark (-run '^$' -bench Name), a bench/ script or a make target, or link docs/dev/reproduce.md", name, r.line, r.pattern)
		}
	}
}

// A go test command of a page that runs tests by name.
type testRun struct {
	line    int
	pattern string
}

var (
	fencedBlock = regexp.MustCompile("(?s)```.*?```")
	codeSpan    = regexp.MustCompile("`[^`]+`")
	runFlag     = regexp.MustCompile(`(?:^|\s)-run(?:=|\s+)('[^']*'|"[^"]*"|\S+)`)
)

// testRuns: the go test commands of text — in fenced blocks, one a line up
// to a comment, and in code spans, which may wrap — whose -run pattern is
// anything but ^$ (which runs no test, as before -bench or -fuzz).
func testRuns(text string) []testRun {
	var cmds []testRun // line and command text
	var prose strings.Builder
	at := 0
	for _, loc := range fencedBlock.FindAllStringIndex(text, -1) {
		block := text[loc[0]:loc[1]]
		start := strings.Count(text[:loc[0]], "\n") + 1
		for i, line := range strings.Split(block, "\n") {
			line, _, _ = strings.Cut(line, " #")
			cmds = append(cmds, testRun{line: start + i, pattern: line})
		}
		prose.WriteString(text[at:loc[0]])
		prose.WriteString(strings.Repeat("\n", strings.Count(block, "\n")))
		at = loc[1]
	}
	prose.WriteString(text[at:])
	rest := prose.String()
	for _, loc := range codeSpan.FindAllStringIndex(rest, -1) {
		cmds = append(cmds, testRun{line: strings.Count(rest[:loc[0]], "\n") + 1, pattern: rest[loc[0]+1 : loc[1]-1]})
	}
	var runs []testRun
	for _, c := range cmds {
		_, cmd, ok := strings.Cut(c.pattern, "go test")
		if !ok {
			continue
		}
		for _, m := range runFlag.FindAllStringSubmatch(cmd, -1) {
			if p := strings.Trim(m[1], `'"`); p != "^$" {
				runs = append(runs, testRun{line: c.line, pattern: m[1]})
			}
		}
	}
	return runs
}

func TestTestRuns(t *testing.T) {
	t.Parallel()
	text := "a `go test -run '^$' -bench Scrape ./x` b\n" +
		"c (`go test -run\n'Lease|Fencing' ./internal/server/store/`) d\n" +
		"```sh\nmake lab-degrade\ngo test ./internal/x -run DegradeOnLab -v   # -run Other\n```\n" +
		"e `go test ./y -v -run=Replicas`, the -run timeout\n"
	got := fmt.Sprint(testRuns(text))
	if want := "[{6 DegradeOnLab} {2 'Lease|Fencing'} {8 Replicas}]"; got != want {
		t.Errorf("testRuns = %s, want %s", got, want)
	}
	for _, tt := range []struct {
		line string
		want bool
	}{{"see issue 12", true}, {"fixed in #7", false}, {"x#7", true}, {"(tested)", true}, {"internal/lab/replay/testdata/x", true}, {"TestFoo", true}, {"the tests", false}, {"a U test of", false}} {
		if got := topLevelWord.MatchString(tt.line); got != tt.want {
			t.Errorf("topLevelWord matches %q = %v, want %v", tt.line, got, tt.want)
		}
	}
}

// The README is a front door: at most ~400 lines, and it links every page.
func TestReadmeIsShortAndLinksThePages(t *testing.T) {
	t.Parallel()
	readme := readPage(t, filepath.Join("..", "README.md"))
	if n := strings.Count(readme, "\n"); n > 420 {
		t.Errorf("README.md has %d lines; keep it a front door (≤ ~400) and move detail to docs/", n)
	}
	for _, cmd := range []string{"make run", "make test"} {
		if !strings.Contains(readme, cmd) {
			t.Errorf("README.md does not show %q", cmd)
		}
	}
	// The production path, in this order (the fleet in a box follows it).
	at := 0
	for _, step := range []string{
		"dpkg -i plumbline-server",
		"plumbline-server ca init --dir /etc/plumbline/pki --name $(hostname -f)",
		"systemctl enable --now plumbline-server",
		"plumbline-server token create",
		"dpkg -i plumbline-agent",
		"plumbline-agent enroll",
		"systemctl enable --now plumbline-agent",
	} {
		i := strings.Index(readme[at:], step)
		if i < 0 {
			t.Errorf("README.md: the production path lacks %q after the steps before it", step)
			continue
		}
		at += i + len(step)
	}
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if !strings.Contains(readme, "docs/"+p) {
			t.Errorf("README.md does not link docs/%s", p)
		}
	}
}

// Every relative link in the docs, the user's and the maintainers'
// (docs/dev/), points at a file that exists.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	docs := userDocs(t)
	dev, err := filepath.Glob(filepath.Join("dev", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range dev {
		docs[filepath.ToSlash(path)] = readPage(t, path)
	}
	for _, name := range sortedKeys(docs) {
		for _, m := range link.FindAllStringSubmatch(docs[name], -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(name), filepath.FromSlash(target))
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s: link %q: %v", name, m[1], err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !headingAnchors(t, path)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", name, m[1], path, anchor)
			}
		}
	}
}

// headingAnchors: the anchors GitHub gives the headings of a Markdown file
// (lower case, punctuation dropped, spaces to hyphens; fenced code skipped).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile("(?s)```.*?```").ReplaceAllString(string(b), "")
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	for _, m := range regexp.MustCompile(`(?m)^#+ (.*)$`).FindAllStringSubmatch(text, -1) {
		h := strings.ToLower(strings.TrimSpace(m[1]))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return anchors
}

// Every alert of the shipped rules is in docs/metrics.md and has a runbook.
func TestEveryAlertDocumented(t *testing.T) {
	t.Parallel()
	rules := readPage(t, filepath.Join("..", "deploy", "prometheus", "plumbline.rules.yml"))
	metrics := readPage(t, "metrics.md")
	alerts := regexp.MustCompile(`(?m)^\s*-\s*alert:\s*["']?(\w+)`).FindAllStringSubmatch(rules, -1)
	if len(alerts) == 0 {
		t.Fatal("no alerts found in deploy/prometheus/plumbline.rules.yml")
	}
	for _, a := range alerts {
		name := a[1]
		if !mentions(metrics, name) {
			t.Errorf("alert %s is not in docs/metrics.md", name)
		}
		if _, err := os.Stat(filepath.Join("runbooks", name+".md")); err != nil {
			t.Errorf("alert %s has no runbook docs/runbooks/%s.md", name, name)
		}
		if !strings.Contains(metrics, "runbooks/"+name+".md") {
			t.Errorf("docs/metrics.md does not link the runbook of %s (runbooks/%s.md)", name, name)
		}
	}
}

// Every path of the OpenAPI document, and every API route the server
// registers, is in docs/api.md.
func TestEveryAPIPathDocumented(t *testing.T) {
	t.Parallel()
	api := readPage(t, "api.md")
	doc := readPage(t, filepath.Join("..", "api", "openapi.yaml"))
	paths := regexp.MustCompile(`(?m)^  (/\S*):\s*$`).FindAllStringSubmatch(doc, -1)
	if len(paths) == 0 {
		t.Fatal("no paths found in api/openapi.yaml")
	}
	want := map[string]string{}
	for _, p := range paths {
		want[p[1]] = "api/openapi.yaml"
	}
	for path, file := range registeredRoutes(t) {
		if _, ok := want[path]; !ok {
			want[path] = file
		}
	}
	for _, p := range sortedKeys(want) {
		if !strings.Contains(api, "`"+p+"`") && !strings.Contains(api, " "+p+"`") && !strings.Contains(api, p+"?") {
			t.Errorf("API path %s (from %s) is not in docs/api.md", p, want[p])
		}
	}
}

// registeredRoutes: the /api/ routes the server's code registers, from
// its string literals ("/api/v1/x" or "GET /api/v1/x").
func registeredRoutes(t *testing.T) map[string]string {
	t.Helper()
	route := regexp.MustCompile(`"(?:GET |POST |PUT |DELETE )?(/api/v\d+/[^"\s?]*)"`)
	found := map[string]string{}
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			if strings.Contains(filepath.ToSlash(path), "/fleetsim/") || strings.Contains(filepath.ToSlash(path), "/client/") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range route.FindAllStringSubmatch(string(b), -1) {
				if strings.HasSuffix(m[1], "/") {
					continue
				}
				found[m[1]] = filepath.ToSlash(path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found
}

// Every metric family the server and the agent expose is in
// docs/metrics.md, by its full name.
func TestEveryMetricDocumented(t *testing.T) {
	t.Parallel()
	metrics := readPage(t, "metrics.md")
	families, err := metricsource.Families("..")
	if err != nil {
		t.Fatal(err)
	}
	if len(families) < 20 {
		t.Fatalf("found only %d metric families in the source: %v", len(families), sortedKeys(families))
	}
	for name, where := range scrapeDevServer(t) {
		if _, ok := families[name]; !ok {
			families[name] = where
		}
	}
	collectors := map[string]bool{} // go_, process_: one line for the collector, not one per family
	for _, name := range sortedKeys(families) {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			prefix, _, _ := strings.Cut(name, "_")
			if !strings.Contains(metrics, "`"+prefix+"_") && !collectors[prefix] {
				collectors[prefix] = true
				t.Errorf("metric %s and the rest of %s_* (from %s): docs/metrics.md does not describe the %s_* collector", name, prefix, families[name], prefix)
			}
			continue
		}
		if !mentions(metrics, name) {
			t.Errorf("metric %s (from %s) is not in docs/metrics.md", name, families[name])
		}
	}
}

func TestMentions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text, word string
		want       bool
	}{
		{"`plumbline_agent_up`", "plumbline_agent_up", true},
		{"`plumbline_agent_up{agent_id}`", "plumbline_agent_up", true},
		{"plumbline_agent_up_total", "plumbline_agent_up", false},
		{"`--config.check`", "--config", false},
		{"`--config FILE`", "--config", true},
		{"--config=x", "--config", true},
		{"ends with --uses.", "--uses", true},
		{"--store.dsn", "--store", false},
	} {
		if got := mentions(tt.text, tt.word); got != tt.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tt.text, tt.word, got, tt.want)
		}
	}
}

// Every key of the agent's and the server's configuration files (their
// structs' yaml tags) is in docs/configuration.md, inside a code span.
func TestEveryConfigKeyDocumented(t *testing.T) {
	t.Parallel()
	conf := readPage(t, "configuration.md")
	spans := strings.Join(regexp.MustCompile("`[^`\n]+`").FindAllString(conf, -1), " ")
	tag := regexp.MustCompile(`yaml:"([a-z][a-z0-9_]*)`)
	keys := map[string]string{}
	for _, dir := range []string{filepath.Join("agent", "config"), "agentkeys", filepath.Join("server", "config"), "policy", "maintenance"} {
		err := filepath.WalkDir(filepath.Join("..", "internal", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range tag.FindAllStringSubmatch(string(b), -1) {
				keys[m[1]] = strings.TrimPrefix(filepath.ToSlash(path), "../")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) < 30 {
		t.Fatalf("found only %d configuration keys: %v", len(keys), sortedKeys(keys))
	}
	for _, k := range sortedKeys(keys) {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(k) + `\b`).MatchString(spans) {
			t.Errorf("configuration key %s (from %s) is not in docs/configuration.md", k, keys[k])
		}
	}
}
