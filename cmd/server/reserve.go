package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/plumbline/plumbline/internal/identity"
	"github.com/plumbline/plumbline/internal/labels"
	"github.com/plumbline/plumbline/internal/server/config"
	"github.com/plumbline/plumbline/internal/server/store"
)

// reservationCommand is `server agent reserve|unreserve|reserved`.
func reservationCommand(ctx context.Context, cfg config.Config, cmd, id, reason string, stdout io.Writer) error {
	if cmd != "reserved" {
		if err := identity.CheckAgentID(id); err != nil {
			return fmt.Errorf("agent id %q: %w", id, err)
		}
	}
	if len(reason) > 200 || labels.CheckText(reason) != nil {
		return fmt.Errorf("--reason: want at most 200 bytes of printable text")
	}
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	st, err := store.Open(octx, cfg.StoreDSN())
	cancel()
	if err != nil {
		return err
	}
	defer st.Close()
	switch cmd {
	case "reserve":
		added, err := st.ReserveAgentID(ctx, store.Reservation{AgentID: id, Source: store.ReservedByOperator, Reason: reason})
		if err != nil {
			return err
		}
		if !added {
			fmt.Fprintf(stdout, "agent id %s was already reserved\n", id)
			return nil
		}
		fmt.Fprintf(stdout, "agent id %s reserved: no join token can enroll it (server agent unreserve %s releases it)\n", id, id)
	case "unreserve":
		removed, err := st.UnreserveAgentID(ctx, id)
		if err != nil {
			return err
		}
		if !removed {
			return fmt.Errorf("agent id %s is not reserved", id)
		}
		fmt.Fprintf(stdout, "agent id %s released: a join token may enroll it\n", id)
	default:
		rs, err := st.ReservedAgentIDs(ctx)
		if err != nil {
			return err
		}
		return writeTable(stdout, "AGENT\tSOURCE\tRESERVED\tREASON", rs, func(r store.Reservation) string {
			return fmt.Sprintf("%s\t%s\t%s\t%s", r.AgentID, r.Source, r.Reserved.UTC().Format(time.RFC3339), r.Reason)
		})
	}
	return nil
}
