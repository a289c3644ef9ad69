// Package grpcservice registers the server's gRPC services (ingest's agent
// and health services, the enrollment authority's) the one way they are
// all registered.
package grpcservice

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Register registers impl on gs like the generated Register…Server
// functions, with one difference: a request whose message does not decode
// is refused with InvalidArgument, the caller's mistake, where gRPC says
// Internal (the generated handlers return the decoder's error before any
// interceptor runs, so only the handler itself can relabel it). Every
// service of the server is registered through it.
func Register(gs *grpc.Server, desc *grpc.ServiceDesc, impl any) {
	d := *desc
	d.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		h := m.Handler
		m.Handler = func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			return h(srv, ctx, invalidArgumentOnDecode(dec), ic)
		}
		d.Methods[i] = m
	}
	gs.RegisterService(&d, impl)
}

// invalidArgumentOnDecode is dec with its errors (the message did not
// decode) as InvalidArgument.
func invalidArgumentOnDecode(dec func(any) error) func(any) error {
	return func(m any) error {
		err := dec(m)
		if err == nil {
			return nil
		}
		return status.Error(codes.InvalidArgument, "the request message does not decode: "+status.Convert(err).Message())
	}
}
