package exporter

import (
	"context"
	"strings"
	"testing"
	"time"
)

// An agent is up while a replica noted it connected within the
// threshold, however old its last report; down when neither its report
// nor its connection is.
func TestAgentUpWhileConnected(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	seed(t, st, []host{
		{id: "idle", hostname: "idle.example", lastSeen: epoch},
		{id: "gone", hostname: "gone.example", lastSeen: epoch},
	})
	now := epoch.Add(3 * time.Hour)
	if err := st.MarkConnected(context.Background(), []string{"idle"}, now.Add(-20*time.Second)); err != nil {
		t.Fatal(err)
	}
	c, err := New(st, Options{Now: func() time.Time { return now }, AgentStaleAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	body := get(t, c, "", "").Body.String()
	for _, want := range []string{
		`plumbline_agent_up{agent_id="idle",host="idle.example"} 1`,
		`plumbline_agent_up{agent_id="gone",host="gone.example"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %s in\n%s", want, body)
		}
	}
}
