// Package client is a small Go client of the HTTP inventory API
// (internal/server/inventory): GET a path with query parameters, with a bearer
// token, and decode or stream the answer. The API's errors come back with
// their message and, for a bad parameter, the values it allows.
package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Options are a Client's credentials.
type Options struct {
	// Token is the API bearer token; empty: none sent.
	Token string
	// CAFile holds the CA(s) (PEM) that sign an https server's
	// certificate; empty: the system's roots.
	CAFile string
}

// Client calls one server's inventory API.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// New is a client of the API at base (http://127.0.0.1:9464).
func New(base string, opts Options) (*Client, error) {
	c := &Client{base: strings.TrimSuffix(base, "/"), token: opts.Token,
		hc: &http.Client{Timeout: 5 * time.Minute}}
	if caFile := opts.CAFile; caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", caFile)
		}
		c.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	}
	return c, nil
}

// do is GET path?q: the response when 200 OK, else an error with the
// API's message.
func (c *Client) do(ctx context.Context, path string, q url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e struct {
			Error   string   `json:"error"`
			Allowed []string `json:"allowed"`
		}
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e)
		if len(e.Allowed) > 0 {
			return nil, fmt.Errorf("%s: %s: %s (allowed: %s)", path, resp.Status, e.Error, strings.Join(e.Allowed, ", "))
		}
		return nil, fmt.Errorf("%s: %s: %s", path, resp.Status, e.Error)
	}
	return resp, nil
}

// Get decodes the JSON answer to GET path?q into out.
func (c *Client) Get(ctx context.Context, path string, q url.Values, out any) error {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(out)
}

// Stream copies the answer to GET path?q to w (CSV, NDJSON).
func (c *Client) Stream(ctx context.Context, path string, q url.Values, w io.Writer) error {
	resp, err := c.do(ctx, path, q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}
