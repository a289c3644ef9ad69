package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/plumbline/plumbline/internal/enroll"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/server"
	"github.com/plumbline/plumbline/internal/server/authority"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/store"
)

const tokenUsage = `usage: server token create [--ttl 24h] [--uses N] [--labels k=v,...] (--config FILE | --data-dir DIR)
       server token list|revoke ID                                      (--config FILE | --data-dir DIR)
       server agent list|revoke ID                                      (--config FILE | --data-dir DIR)
       server agent reserve ID [--reason TEXT] | unreserve ID | reserved (--config FILE | --data-dir DIR)

Join tokens and enrolled agents (docs/install.md), in the server's store.
'token create' prints the token and the CA pin agents enroll with:
  agent enroll --server ADDR --token-file FILE --ca-hash sha256:... --dir DIR
'agent revoke' refuses the agent's certificates (within 10s on running
servers) and their renewal.
'agent reserve' keeps a join token from enrolling an agent id (an agent
with a certificate of your own PKI that has not connected yet); ids seen
with a certificate of another CA are reserved by the server itself.
'agent unreserve' releases one; 'agent reserved' lists them.

flags:
`

// runEnrollment is `server token ...` and `server agent ...` (what is "token" or "agent").
func runEnrollment(ctx context.Context, what string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("server "+what, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		configFile = fs.String("config", "", "the server's YAML configuration `file`")
		dataDir    = fs.String("data-dir", "", "the server's data `directory` (default: the configuration's)")
		dsn        = fs.String("store.dsn", "", "store `DSN` (default: the configuration's)")
		ttl        = fs.Duration("ttl", authority.DefaultTokenTTL, "create: how long the token enrolls agents")
		uses       = fs.Int64("uses", 1, "create: how many agents the token enrolls")
		labels     = fs.String("labels", "", "create: labels for the agents it enrolls, k=v,k2=v2")
		reason     = fs.String("reason", "", "agent reserve: why the id is reserved (shown in refusals)")
	)
	fs.Usage = func() { fmt.Fprint(stderr, tokenUsage); fs.PrintDefaults() }
	if len(args) == 0 {
		fs.Usage()
		return 2
	}
	cmd := args[0]
	// Flags before and after the ID.
	var pos []string
	for rest := args[1:]; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		pos, rest = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	wantArgs := map[string]int{"create": 0, "list": 0, "revoke": 1, "reserve": 1, "unreserve": 1, "reserved": 0}
	agentOnly := cmd == "reserve" || cmd == "unreserve" || cmd == "reserved"
	if n, ok := wantArgs[cmd]; !ok || len(pos) != n || what == "agent" && cmd == "create" || what == "token" && agentOnly {
		fs.Usage()
		return 2
	}
	cfg, _, err := loadFile(*configFile)
	if err == nil && *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if *dsn != "" {
		cfg.Store.DSN = *dsn
	}
	if err == nil && (*uses < 1 || *ttl <= 0) {
		err = fmt.Errorf("--uses %d and --ttl %s: want at least 1 use and a positive duration", *uses, *ttl)
	}
	if err == nil {
		if agentOnly {
			err = reservationCommand(ctx, cfg, cmd, strings.Join(pos, ""), *reason, stdout)
		} else {
			err = enrollmentCommand(ctx, cfg, what+" "+cmd, strings.Join(pos, ""), authority.TokenSpec{TTL: *ttl, Uses: *uses}, *labels, stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "server %s %s: %v\n", what, cmd, err)
		return 1
	}
	return 0
}

func enrollmentCommand(ctx context.Context, cfg config.Config, cmd, arg string, spec authority.TokenSpec, labelFlag string, stdout io.Writer) error {
	var pin string
	if cmd == "token create" { // the CA first: no token for a server that cannot enroll
		files, err := server.EnrollmentFiles(cfg)
		if err != nil {
			return err
		}
		ca, err := authority.LoadCA(files)
		if err != nil {
			return err
		}
		pin = ca.Pin()
		if spec.Labels, err = labels.Parse(labelFlag); err != nil {
			return fmt.Errorf("--labels: %w", err)
		}
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	st, err := store.Open(octx, cfg.StoreDSN())
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()
	switch cmd {
	case "token create":
		tok, jt, err := authority.CreateToken(ctx, st, spec, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token: %s\nca-hash: %s\nexpires: %s\nuses: %d\nlabels: %s\n", tok, pin, jt.Expires.UTC().Format(time.RFC3339), jt.MaxUses, labels.Format(jt.Labels))
		return nil
	case "token list":
		return listTokens(ctx, st, stdout)
	case "token revoke":
		if err := enroll.CheckTokenID(arg); err != nil {
			return err
		}
		if err := st.RevokeJoinToken(ctx, arg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "token %s revoked\n", arg)
		return nil
	case "agent list":
		return listEnrolled(ctx, st, stdout)
	default: // agent revoke
		if err := st.RevokeAgent(ctx, arg); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "agent %s revoked: its certificates are refused and not renewed\n", arg)
		return nil
	}
}

func listTokens(ctx context.Context, st *store.Store, w io.Writer) error {
	toks, err := st.JoinTokens(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	return writeTable(w, "ID\tSTATE\tUSES\tEXPIRES\tCREATED\tLABELS", toks, func(t store.JoinToken) string {
		state := "active"
		switch {
		case !t.Revoked.IsZero():
			state = "revoked"
		case !now.Before(t.Expires):
			state = "expired"
		case t.Uses >= t.MaxUses:
			state = "used-up"
		}
		return fmt.Sprintf("%s\t%s\t%d/%d\t%s\t%s\t%s", t.ID, state, t.Uses, t.MaxUses, t.Expires.Format(time.RFC3339), t.Created.Format(time.RFC3339), cell(labels.Format(t.Labels)))
	})
}

func listEnrolled(ctx context.Context, st *store.Store, w io.Writer) error {
	agents, err := st.EnrolledAgents(ctx)
	if err != nil {
		return err
	}
	return writeTable(w, "AGENT\tSTATE\tNOT AFTER\tTOKEN\tSERIAL\tLABELS", agents, func(a store.EnrolledAgent) string {
		state := "active"
		if !a.Revoked.IsZero() {
			state = "revoked"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", cell(a.AgentID), state, a.NotAfter.Format(time.RFC3339), a.TokenID, a.Serial, cell(labels.Format(a.Labels)))
	})
}

// writeTable writes the tab-separated header and one row per record,
// aligned in columns.
func writeTable[T any](w io.Writer, header string, recs []T, row func(T) string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range recs {
		fmt.Fprintln(tw, row(r))
	}
	return tw.Flush()
}
