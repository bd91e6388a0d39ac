package process

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/minfer/minfer/sdk"
)

// gRPC services (version 1), hand-written descriptors with the minfer1 codec:
//
//	minfer.process.v1.Meta     Info(empty) infoResponse; Caps(empty) capsResponse (minor 1)
//	minfer.process.v1.Policy   New(newRequest) newResponse; Free(idRequest) empty;
//	                           NextDepth(policyRequest) policyResponse
//	minfer.process.v1.Sampler  New, Free; Sample(sampleRequest) sampleResponse
//	minfer.process.v1.Penalty  New, Free; Apply(penaltyRequest) penaltyResponse
//	minfer.process.v1.Drafter  New, Free; Draft(draftRequest) draftResponse
const (
	metaService = "minfer.process.v1.Meta"
	servicePref = "minfer.process.v1."
)

var serviceOf = map[sdk.Role]string{
	sdk.RolePolicy:  servicePref + "Policy",
	sdk.RoleSampler: servicePref + "Sampler",
	sdk.RolePenalty: servicePref + "Penalty",
	sdk.RoleDrafter: servicePref + "Drafter",
}

var callOf = map[sdk.Role]string{
	sdk.RolePolicy:  "NextDepth",
	sdk.RoleSampler: "Sample",
	sdk.RolePenalty: "Apply",
	sdk.RoleDrafter: "Draft",
}

// unary makes a method handler that decodes a *Req, runs call with panics turned into
// errors, and honours an interceptor.
func unary[Req any, PReq interface {
	*Req
	message
}](full string, call func(context.Context, PReq) (message, error)) grpc.MethodHandler {
	return func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		req := PReq(new(Req))
		if err := dec(req); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, r any) (resp any, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = status.Errorf(codes.Internal, "plugin panicked: %v", p)
				}
			}()
			resp, err = call(ctx, r.(PReq))
			switch {
			case err == nil:
			case errors.Is(err, context.DeadlineExceeded):
				err = status.Error(codes.DeadlineExceeded, err.Error())
			case errors.Is(err, context.Canceled):
				err = status.Error(codes.Canceled, err.Error())
			}
			return resp, err
		}
		if ic == nil {
			return h(ctx, req)
		}
		return ic(ctx, req, &grpc.UnaryServerInfo{FullMethod: full}, h)
	}
}

func (s *server) registerMeta(g *grpc.Server) {
	info := func(context.Context, *empty) (message, error) {
		resp := &infoResponse{Protocol: ProtocolVersion, Name: s.p.Name, Version: s.p.Version}
		for _, r := range s.p.Roles() {
			resp.Roles = append(resp.Roles, string(r))
		}
		return resp, nil
	}
	caps := func(context.Context, *empty) (message, error) {
		return &capsResponse{Minor: ProtocolMinor, Declared: s.p.ParamsDeclared, Params: s.p.Params}, nil
	}
	g.RegisterService(&grpc.ServiceDesc{
		ServiceName: metaService,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "Info", Handler: unary("/"+metaService+"/Info", info)},
			{MethodName: "Caps", Handler: unary("/"+metaService+"/Caps", caps)},
		},
	}, s)
}

func (s *server) registerRole(g *grpc.Server, role sdk.Role) {
	svc := serviceOf[role]
	full := func(m string) string { return "/" + svc + "/" + m }
	methods := []grpc.MethodDesc{
		{MethodName: "New", Handler: unary(full("New"), func(_ context.Context, req *newRequest) (message, error) {
			return s.newInstance(role, req.Params)
		})},
		{MethodName: "Free", Handler: unary(full("Free"), func(_ context.Context, req *idRequest) (message, error) {
			s.free(req.ID)
			return &empty{}, nil
		})},
	}
	var call grpc.MethodHandler
	switch role {
	case sdk.RolePolicy:
		call = unary(full(callOf[role]), func(ctx context.Context, req *policyRequest) (message, error) {
			p, err := get[sdk.DepthPolicy](s, req.ID, role)
			if err != nil {
				return nil, status.Error(codes.NotFound, err.Error())
			}
			d, err := p.NextDepth(ctx, req.Last)
			return &policyResponse{d}, err
		})
	case sdk.RoleSampler:
		call = unary(full(callOf[role]), func(ctx context.Context, req *sampleRequest) (message, error) {
			p, err := get[sdk.Sampler](s, req.ID, role)
			if err != nil {
				return nil, status.Error(codes.NotFound, err.Error())
			}
			r, err := p.Sample(ctx, &req.Round)
			return &sampleResponse{r}, err
		})
	case sdk.RolePenalty:
		call = unary(full(callOf[role]), func(ctx context.Context, req *penaltyRequest) (message, error) {
			p, err := get[sdk.Penalty](s, req.ID, role)
			if err != nil {
				return nil, status.Error(codes.NotFound, err.Error())
			}
			if err := p.Apply(ctx, req.Rows); err != nil {
				return nil, err
			}
			resp := &penaltyResponse{Logits: make([][]float32, len(req.Rows))}
			for i := range req.Rows {
				resp.Logits[i] = req.Rows[i].Logits
			}
			return resp, nil
		})
	case sdk.RoleDrafter:
		call = unary(full(callOf[role]), func(ctx context.Context, req *draftRequest) (message, error) {
			p, err := get[sdk.Drafter](s, req.ID, role)
			if err != nil {
				return nil, status.Error(codes.NotFound, err.Error())
			}
			r, err := p.Draft(ctx, &req.Q)
			return &draftResponse{r}, err
		})
	}
	methods = append(methods, grpc.MethodDesc{MethodName: callOf[role], Handler: call})
	g.RegisterService(&grpc.ServiceDesc{ServiceName: svc, HandlerType: (*any)(nil), Methods: methods}, s)
}

// newInstance runs the role's constructor.
func (s *server) newInstance(role sdk.Role, params []byte) (message, error) {
	if len(params) == 0 {
		params = []byte("{}")
	}
	resp := &newResponse{}
	var inst any
	switch role {
	case sdk.RolePolicy:
		p, err := s.p.Policy(params)
		if err != nil {
			return nil, err
		}
		inst = p
	case sdk.RoleSampler:
		p, err := s.p.Sampler(params)
		if err != nil {
			return nil, err
		}
		resp.TopK = int64(p.Needs().TopK)
		inst = p
	case sdk.RolePenalty:
		p, err := s.p.Penalty(params)
		if err != nil {
			return nil, err
		}
		resp.Window = int64(p.Window())
		inst = p
	case sdk.RoleDrafter:
		p, err := s.p.Drafter(params)
		if err != nil {
			return nil, err
		}
		inst = p
	}
	if inst == nil {
		return nil, fmt.Errorf("%s constructor returned nil", role)
	}
	resp.ID = s.add(inst)
	return resp, nil
}

// Conn is the host's side of one plugin process: the client stubs of the services above.
// It is safe for concurrent use. Errors are gRPC status errors (status.Code tells a
// deadline from a plugin error from a dead process); plugins/process wraps them with
// the plugin's name and role.
type Conn struct {
	cc    *grpc.ClientConn
	minor atomic.Uint32 // the plugin's protocol minor, from Caps
}

// ErrMalformed marks a reply whose shape does not fit the request.
var ErrMalformed = errors.New("malformed result")

// Info is what a plugin binary says about itself. Minor is the protocol minor it
// speaks (0 before Caps); Params and ParamsDeclared its params declaration (see
// sdk.Info).
type Info struct {
	Protocol       int
	Minor          int
	Name           string
	Version        string
	Roles          []sdk.Role
	Params         []string
	ParamsDeclared bool
}

// Instance is a role instance living in the plugin process.
type Instance struct {
	Role   sdk.Role
	ID     uint64
	Window int // Penalty.Window of a penalty instance
	TopK   int // Needs().TopK of a sampler instance
}

func (c *Conn) invoke(ctx context.Context, method string, req, resp message) error {
	return c.cc.Invoke(ctx, method, req, resp, grpc.CallContentSubtype(CodecName))
}

// Info asks the plugin for its name, version and roles, then (Caps) for its protocol
// minor and params declaration; a plugin built before Caps answers Unimplemented, and
// is minor 0 and declares nothing.
func (c *Conn) Info(ctx context.Context) (Info, error) {
	var resp infoResponse
	if err := c.invoke(ctx, "/"+metaService+"/Info", &empty{}, &resp); err != nil {
		return Info{}, err
	}
	info := Info{Protocol: int(resp.Protocol), Name: resp.Name, Version: resp.Version}
	for _, r := range resp.Roles {
		info.Roles = append(info.Roles, sdk.Role(r))
	}
	var caps capsResponse
	switch err := c.invoke(ctx, "/"+metaService+"/Caps", &empty{}, &caps); {
	case status.Code(err) == codes.Unimplemented:
	case err != nil:
		return Info{}, fmt.Errorf("caps: %w", err)
	default:
		info.Minor, info.Params, info.ParamsDeclared = int(caps.Minor), caps.Params, caps.Declared
		c.minor.Store(caps.Minor)
	}
	return info, nil
}

// New creates an instance of role with params (a JSON object).
func (c *Conn) New(ctx context.Context, role sdk.Role, params []byte) (Instance, error) {
	svc, ok := serviceOf[role]
	if !ok {
		return Instance{}, fmt.Errorf("unknown role %q", role)
	}
	var resp newResponse
	if err := c.invoke(ctx, "/"+svc+"/New", &newRequest{Params: params}, &resp); err != nil {
		return Instance{}, err
	}
	return Instance{Role: role, ID: resp.ID, Window: int(resp.Window), TopK: int(resp.TopK)}, nil
}

// Free releases an instance in the plugin process.
func (c *Conn) Free(ctx context.Context, in Instance) error {
	return c.invoke(ctx, "/"+serviceOf[in.Role]+"/Free", &idRequest{ID: in.ID}, &empty{})
}

// NextDepth calls a policy instance.
func (c *Conn) NextDepth(ctx context.Context, in Instance, last sdk.RoundOutcome) (sdk.DepthDecision, error) {
	var resp policyResponse
	err := c.invoke(ctx, "/"+serviceOf[sdk.RolePolicy]+"/NextDepth", &policyRequest{ID: in.ID, Last: last, Minor: c.minor.Load()}, &resp)
	return resp.DepthDecision, err
}

// Sample calls a sampler instance.
func (c *Conn) Sample(ctx context.Context, in Instance, r *sdk.SampleRound) (sdk.SampleResult, error) {
	var resp sampleResponse
	err := c.invoke(ctx, "/"+serviceOf[sdk.RoleSampler]+"/Sample", &sampleRequest{ID: in.ID, Round: *r}, &resp)
	return resp.SampleResult, err
}

// Draft calls a drafter instance. The reply is not checked here (plugins/process
// checks it against the request with sdk.CheckDraft).
func (c *Conn) Draft(ctx context.Context, in Instance, q *sdk.DraftRequest) (sdk.DraftResult, error) {
	var resp draftResponse
	err := c.invoke(ctx, "/"+serviceOf[sdk.RoleDrafter]+"/Draft", &draftRequest{ID: in.ID, Q: *q}, &resp)
	return resp.DraftResult, err
}

// Apply calls a penalty instance and writes the returned logits into rows. A reply whose
// shape differs from rows (row count, logits per row) is an error and rows stay as
// they were.
func (c *Conn) Apply(ctx context.Context, in Instance, rows []sdk.PenaltyRow) error {
	var resp penaltyResponse
	if err := c.invoke(ctx, "/"+serviceOf[sdk.RolePenalty]+"/Apply", &penaltyRequest{ID: in.ID, Rows: rows}, &resp); err != nil {
		return err
	}
	if len(resp.Logits) != len(rows) {
		return fmt.Errorf("%w: %d rows, want %d", ErrMalformed, len(resp.Logits), len(rows))
	}
	for i := range rows {
		if len(resp.Logits[i]) != len(rows[i].Logits) {
			return fmt.Errorf("%w: row %d has %d logits, want %d", ErrMalformed, i, len(resp.Logits[i]), len(rows[i].Logits))
		}
	}
	for i := range rows {
		copy(rows[i].Logits, resp.Logits[i])
	}
	return nil
}
