package ingest

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// rawCodec sends the bytes it is given as the message, whatever they are.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = data; return nil }
func (rawCodec) Name() string                       { return "proto" }

// A message that does not decode is the caller's mistake: InvalidArgument
// (gRPC's own answer was Internal), on the agent service and on the
// health service, over real TLS.
func TestUndecodableMessageIsInvalidArgument(t *testing.T) {
	t.Parallel()
	e := startServer(t, sqliteDSN(t), newPKI(t), Options{})
	leaf, err := e.pki.ca.IssueAgent("db1")
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient(e.addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS(e.pki.ca.Pool(), leaf))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	garbage := []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f} // field 1, a length beyond the message
	for _, method := range []string{"/plumbline.v1.AgentService/Report", "/plumbline.v1.AgentService/Hello", healthpb.Health_Check_FullMethodName} {
		var out []byte
		err := cc.Invoke(ctxT(t), method, &garbage, &out, grpc.ForceCodec(rawCodec{}))
		wantCode(t, method, err, codes.InvalidArgument, "does not decode")
	}
}
