package inventory

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// paramError is a bad query parameter: 400 with the parameter's name and,
// for enumerations, the allowed values.
type paramError struct {
	Param   string
	Msg     string
	Allowed []string
}

func (e *paramError) Error() string { return e.Msg }

func badParam(name string, allowed []string, format string, args ...any) *paramError {
	return &paramError{Param: name, Msg: fmt.Sprintf(format, args...), Allowed: allowed}
}

// Paging bounds.
const (
	defaultLimit = 100
	maxLimit     = 1000
	maxParamLen  = 1024
)

// params reads a request's query, refusing unknown and repeated parameters.
type params struct {
	q url.Values
}

func newParams(r *http.Request, allowed []string) (*params, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badParam("", nil, "malformed query string: %v", err)
	}
	for k, v := range q {
		if !slices.Contains(allowed, k) {
			return nil, badParam(k, append([]string{}, allowed...), "unknown parameter %q", k)
		}
		if len(v) > 1 {
			return nil, badParam(k, nil, "parameter %q given %d times: give it once", k, len(v))
		}
		if len(v[0]) > maxParamLen {
			return nil, badParam(k, nil, "parameter %q: %d bytes: want at most %d", k, len(v[0]), maxParamLen)
		}
	}
	return &params{q: q}, nil
}

func (p *params) has(name string) bool { return p.q.Has(name) }

func (p *params) str(name string) (string, error) {
	v := p.q.Get(name)
	if p.q.Has(name) && v == "" {
		return "", badParam(name, nil, "parameter %q is empty", name)
	}
	return v, nil
}

func (p *params) enum(name string, allowed []string) (string, error) {
	v, err := p.str(name)
	if err != nil || v == "" {
		return v, err
	}
	if !slices.Contains(allowed, v) {
		return "", badParam(name, allowed, "%s %q: want one of %s", name, v, strings.Join(allowed, ", "))
	}
	return v, nil
}

func (p *params) int64(name string, min, max int64) (*int64, error) {
	v, err := p.str(name)
	if err != nil || v == "" {
		return nil, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return nil, badParam(name, nil, "%s %q: want an integer from %d to %d", name, v, min, max)
	}
	return &n, nil
}

func (p *params) float(name string, min, max float64) (*float64, error) {
	v, err := p.str(name)
	if err != nil || v == "" {
		return nil, err
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || f < min || f > max {
		return nil, badParam(name, nil, "%s %q: want a number from %g to %g", name, v, min, max)
	}
	return &f, nil
}

func (p *params) bool(name string) (*bool, error) {
	v, err := p.enum(name, []string{"true", "false"})
	if err != nil || v == "" {
		return nil, err
	}
	b := v == "true"
	return &b, nil
}

// sortParam reads sort=field or sort=-field.
func (p *params) sortParam(allowed []string, def string) (string, bool, error) {
	v, err := p.str("sort")
	if err != nil {
		return "", false, err
	}
	if v == "" {
		return def, false, nil
	}
	desc := strings.HasPrefix(v, "-")
	field := strings.TrimPrefix(v, "-")
	if !slices.Contains(allowed, field) {
		var all []string
		for _, a := range allowed {
			all = append(all, a, "-"+a)
		}
		return "", false, badParam("sort", all, "sort %q: want a field, or -field for descending: %s", v, strings.Join(allowed, ", "))
	}
	return field, desc, nil
}

func (p *params) limit() (int, error) {
	n, err := p.int64("limit", 1, maxLimit)
	if err != nil || n == nil {
		return defaultLimit, err
	}
	return int(*n), nil
}

// format is the response format: format= wins, then Accept: text/csv.
func (p *params) format(r *http.Request) (string, error) {
	f, err := p.enum("format", []string{"json", "csv"})
	if err != nil || f != "" {
		return f, err
	}
	for _, a := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(a), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/csv") {
			return "csv", nil
		}
	}
	return "json", nil
}

// pageToken is the opaque next_page_token: the keyset of the last row of
// the page, and a hash of the filters and sort it was issued for.
type pageToken struct {
	V    int    `json:"v"`
	Hash uint64 `json:"h"`
	Key  []any  `json:"k"`
}

// queryHash identifies the filters and sort of a request: a token is only
// good for the query it was issued for.
func queryHash(endpoint string, p *params) uint64 {
	h := fnv.New64a()
	h.Write([]byte(endpoint))
	keys := make([]string, 0, len(p.q))
	for k := range p.q {
		switch k {
		case "limit", "next_page_token", "format":
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%s=%s", k, p.q.Get(k))
	}
	return h.Sum64()
}

func encodeToken(hash uint64, key []any) string {
	b, _ := json.Marshal(pageToken{V: 1, Hash: hash, Key: key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeToken reads next_page_token; kinds says the type of each keyset
// value ('s', 'i', 'f'). An empty token (next_page_token=, what a client
// that always sends the last answer's token sends first) is the first page.
func (p *params) token(hash uint64, kinds string) ([]any, error) {
	v := p.q.Get("next_page_token")
	if v == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return badParam("next_page_token", nil, "next_page_token: %s; start again without it", why)
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, bad("not a token this server issued")
	}
	var t pageToken
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&t); err != nil || t.V != 1 || len(t.Key) != len(kinds) {
		return nil, bad("not a token this server issued")
	}
	if t.Hash != hash {
		return nil, bad("issued for other filters or another sort")
	}
	key := make([]any, len(kinds))
	for i, k := range []byte(kinds) {
		var ok bool
		switch n, isNum := t.Key[i].(json.Number); k {
		case 's':
			key[i], ok = t.Key[i].(string)
		case 'i':
			key[i], ok = number(isNum, n.Int64)
		case 'f':
			key[i], ok = number(isNum, n.Float64)
		}
		if !ok {
			return nil, bad("not a token this server issued")
		}
	}
	return key, nil
}

// number is a keyset number read with conv; false when it is not one.
func number[T int64 | float64](isNum bool, conv func() (T, error)) (any, bool) {
	if !isNum {
		return nil, false
	}
	x, err := conv()
	return x, err == nil
}
