package ingest

import (
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	plumblinev1 "github.com/plumbline/plumbline/proto/plumbline/v1"
)

// keyKind is who a call counts against in admission.
type keyKind int

const (
	// byIdentity: the identity of the connection's verified certificate.
	// A call without one is refused before its message is read (unless
	// the method is public, then it counts against its address).
	byIdentity keyKind = iota
	// byAddress: the caller's source address (enrollment: the caller has
	// no certificate yet).
	byAddress
)

// rateFamily names a set of token buckets, one per admission key.
type rateFamily int

const (
	rateAgent   rateFamily = iota // Hello, Report, WatchPolicy, health, unknown methods: Options.RatePerSecond per identity
	rateRenew                     // Renew: Options.RenewRatePerSecond per identity
	rateAddress                   // GetTrustBundle, Enroll: Options.AddressRatePerSecond per source address
	rateFamilies
)

// methodRule is the admission of one gRPC method.
type methodRule struct {
	key  keyKind
	rate rateFamily
	// maxMsg bounds the method's request message: a bigger one is refused
	// with ResourceExhausted before it is decoded. 0: Options.MaxRecvMsgSize.
	maxMsg int64
	// longPoll: the call waits for news (WatchPolicy, the health
	// service's Watch); one identity holds at most MaxLongPolls of them.
	longPoll bool
	// backpressure: the call is ingest work (Report); beyond
	// MaxPendingReports in progress the server refuses it before reading
	// it, with a retry hint.
	backpressure bool
}

// Full method names of the services the gRPC server carries.
var (
	agentSvc  = "/" + plumblinev1.AgentService_ServiceDesc.ServiceName + "/"
	enrollSvc = "/" + plumblinev1.EnrollmentService_ServiceDesc.ServiceName + "/"
	healthSvc = "/" + healthpb.Health_ServiceDesc.ServiceName + "/"
)

// smallMsg bounds the messages of the calls that carry a token, a CSR or
// a service name: a few KiB in practice.
const smallMsg = 16 << 10

// methodRules is the admission of every method the server serves. A
// method missing here gets defaultRule (TestEveryMethodHasAnAdmissionRule
// fails for a registered one): admission does not depend on remembering.
func methodRules() map[string]methodRule {
	return map[string]methodRule{
		agentSvc + "Hello":       {key: byIdentity, rate: rateAgent, maxMsg: 64 << 10},
		agentSvc + "Report":      {key: byIdentity, rate: rateAgent, backpressure: true},
		agentSvc + "WatchPolicy": {key: byIdentity, rate: rateAgent, maxMsg: MaxEffectiveConfigBytes + 16<<10, longPoll: true},

		enrollSvc + "GetTrustBundle": {key: byAddress, rate: rateAddress, maxMsg: 1 << 10},
		enrollSvc + "Enroll":         {key: byAddress, rate: rateAddress, maxMsg: smallMsg},
		enrollSvc + "Renew":          {key: byIdentity, rate: rateRenew, maxMsg: smallMsg},

		healthSvc + "Check": {key: byIdentity, rate: rateAgent, maxMsg: 1 << 10},
		healthSvc + "List":  {key: byIdentity, rate: rateAgent, maxMsg: 1 << 10},
		healthSvc + "Watch": {key: byIdentity, rate: rateAgent, maxMsg: 1 << 10, longPoll: true},
	}
}

// defaultRule admits a method methodRules does not name: a certificate's
// identity, the agent's call rate, a small message.
var defaultRule = methodRule{key: byIdentity, rate: rateAgent, maxMsg: smallMsg}

// msgLimits maps each request message type of rules' methods to the
// largest maxMsg of the methods taking it (0 stands for recvMax).
func msgLimits(rules map[string]methodRule, recvMax int64) map[protoreflect.FullName]int64 {
	out := map[protoreflect.FullName]int64{}
	for name, r := range rules {
		in := inputType(name)
		if in == "" {
			continue
		}
		n := r.maxMsg
		if n <= 0 {
			n = recvMax
		}
		out[in] = max(out[in], n)
	}
	return out
}

// inputType is the request message type of a full method name ("" when
// the registry does not know it).
func inputType(fullMethod string) protoreflect.FullName {
	svc, method := splitMethod(fullMethod)
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return ""
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return ""
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return ""
	}
	return md.Input().FullName()
}

func splitMethod(fullMethod string) (service, method string) {
	for i := len(fullMethod) - 1; i > 0; i-- {
		if fullMethod[i] == '/' {
			return fullMethod[1:i], fullMethod[i+1:]
		}
	}
	return "", fullMethod
}

// sizeCodec is the server's codec: protobuf, with each request type's
// size limit (methodRule.maxMsg) checked before the message is decoded.
// A message over it is not decoded: it is remembered (refused) and the
// interceptor answers ResourceExhausted for it (an error from the codec
// itself would reach the client as Internal).
type sizeCodec struct {
	encoding.CodecV2
	limits  map[protoreflect.FullName]int64
	refused sync.Map // proto.Message → int (its size)
}

func newSizeCodec(limits map[protoreflect.FullName]int64) *sizeCodec {
	return &sizeCodec{CodecV2: encoding.GetCodecV2(protocodec.Name), limits: limits}
}

func (c *sizeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(proto.Message); ok {
		if n, ok := c.limits[m.ProtoReflect().Descriptor().FullName()]; ok && int64(data.Len()) > n {
			c.refused.Store(v, data.Len())
			return nil
		}
	}
	return c.CodecV2.Unmarshal(data, v)
}

// tooBig says whether req was refused undecoded, and its size; it forgets
// req.
func (c *sizeCodec) tooBig(req any) (int, bool) {
	n, ok := c.refused.LoadAndDelete(req)
	if !ok {
		return 0, false
	}
	return n.(int), true
}

// limit is the message limit of msg's type.
func (c *sizeCodec) limit(req any) int64 {
	if m, ok := req.(proto.Message); ok {
		return c.limits[m.ProtoReflect().Descriptor().FullName()]
	}
	return 0
}

// Defaults of the admission bounds beyond the in-flight budgets.
const (
	DefaultMaxAnonymousInflightBytes = 16 << 20
	DefaultMaxLongPolls              = 4
	DefaultMaxPendingReports         = 64
	DefaultBusyRetryAfter            = time.Second
	DefaultMessageReadTimeout        = 30 * time.Second
	// DefaultRenewRatePerSecond and DefaultRenewBurst bound each
	// identity's renewals, DefaultAddressRatePerSecond and
	// DefaultAddressBurst each source address's enrollment calls.
	DefaultRenewRatePerSecond   = 0.1
	DefaultRenewBurst           = 10
	DefaultAddressRatePerSecond = 2
	DefaultAddressBurst         = 40
)

func (o Options) admissionDefaults() Options {
	if o.MaxAnonymousInflightBytes <= 0 {
		o.MaxAnonymousInflightBytes = DefaultMaxAnonymousInflightBytes
	}
	if o.MaxLongPolls <= 0 {
		o.MaxLongPolls = DefaultMaxLongPolls
	}
	if o.MaxPendingReports == 0 {
		o.MaxPendingReports = DefaultMaxPendingReports
	}
	if o.BusyRetryAfter <= 0 {
		o.BusyRetryAfter = DefaultBusyRetryAfter
	}
	switch {
	case o.MessageReadTimeout == 0:
		o.MessageReadTimeout = DefaultMessageReadTimeout
	case o.MessageReadTimeout < 0:
		o.MessageReadTimeout = 0
	}
	if o.RenewRatePerSecond == 0 {
		o.RenewRatePerSecond = DefaultRenewRatePerSecond
	}
	if o.RenewBurst <= 0 {
		o.RenewBurst = DefaultRenewBurst
	}
	if o.AddressRatePerSecond == 0 {
		o.AddressRatePerSecond = DefaultAddressRatePerSecond
	}
	if o.AddressBurst <= 0 {
		o.AddressBurst = DefaultAddressBurst
	}
	return o
}

// checkSize refuses a request the codec left undecoded for its size.
func (s *Service) checkSize(method string, req any) error {
	n, big := s.codec.tooBig(req)
	if !big {
		return nil
	}
	s.adm.stats.refuse(s.adm.label(method), reasonTooBig)
	return status.Errorf(codes.ResourceExhausted, "%s: message of %d bytes, this method takes at most %d", method, n, s.codec.limit(req))
}

// sizedStream checks each message a stream receives as checkSize does.
type sizedStream struct {
	grpc.ServerStream
	s      *Service
	method string
}

func (ss sizedStream) RecvMsg(m any) error {
	if err := ss.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return ss.s.checkSize(ss.method, m)
}
