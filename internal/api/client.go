package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
)

// Client calls the daemon's HTTP API; xupfctl is its main user.
type Client struct {
	baseURL string
	http    *http.Client
	// tokenFile, when set, holds the API token sent with every request.
	tokenFile string
}

// NewClient returns a client for the daemon at baseURL (e.g. "http://127.0.0.1:8080"). A nil
// httpClient means http.DefaultClient; deadlines come from the contexts passed to the methods.
func NewClient(baseURL string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{baseURL: strings.TrimRight(baseURL, "/"), http: httpClient}
}

// WithTokenFile makes c send the API token held in the file at path (see ReadToken) with
// every request, as the daemon requires. The file is read at each request, so a new token is
// picked up; when it cannot be read and the daemon answers 401, the error says why.
func (c *Client) WithTokenFile(path string) *Client {
	c.tokenFile = path
	return c
}

// IsLoopbackHost reports whether host (a name or an address, without a port) is localhost or
// a loopback address: a token sent there in clear does not leave the machine.
func IsLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// TLSConfig returns the TLS settings of a client of a daemon whose certificate is signed by
// the CA (or is the self-signed certificate) in the PEM file caFile; "" trusts the system's
// CAs.
func TLSConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificate %s holds no PEM certificate; give the PEM file of the CA that signed the daemon's certificate", caFile)
	}
	return cfg, nil
}

// ResponseError is a non-2xx answer from the daemon. Its text is the server's own message,
// which is written to be shown to the user as is.
type ResponseError struct {
	StatusCode int
	Message    string
}

func (e *ResponseError) Error() string { return e.Message }

// Is makes errors.Is(err, ErrNotFound) hold for a 404, ErrConflict for a 409 and ErrInvalid
// for a 400, so callers can treat these cases the same on both sides of the API.
func (e *ResponseError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrInvalid:
		return e.StatusCode == http.StatusBadRequest
	}
	return false
}

// Status returns the daemon's overall state.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.get(ctx, "/api/v1/status", &st)
	return st, err
}

// RunningConfig returns the daemon's running configuration, a YAML file xupfd accepts.
func (c *Client) RunningConfig(ctx context.Context) ([]byte, error) {
	var data []byte
	err := c.get(ctx, "/api/v1/config", &data)
	return data, err
}

// Sessions returns every session, sorted by id; never nil.
func (c *Client) Sessions(ctx context.Context) ([]SessionInfo, error) {
	var list []SessionInfo
	if err := c.get(ctx, "/api/v1/sessions", &list); err != nil {
		return nil, err
	}
	if list == nil {
		list = []SessionInfo{}
	}
	return list, nil
}

// Session returns one session; the error satisfies errors.Is(err, ErrNotFound) when the
// daemon has no session with that id.
func (c *Client) Session(ctx context.Context, id uint64) (SessionInfo, error) {
	var info SessionInfo
	err := c.get(ctx, "/api/v1/sessions/"+strconv.FormatUint(id, 10), &info)
	return info, err
}

// Stats returns the datapath's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	err := c.get(ctx, "/api/v1/stats", &st)
	return st, err
}

// Classes returns every traffic class with its counters, sorted by id; never nil.
func (c *Client) Classes(ctx context.Context) ([]ClassInfo, error) {
	var list []ClassInfo
	if err := c.get(ctx, classesPath, &list); err != nil {
		return nil, err
	}
	if list == nil {
		list = []ClassInfo{}
	}
	return list, nil
}

// Class returns one traffic class; the error satisfies errors.Is(err, ErrNotFound) when the
// daemon has no class with that id.
func (c *Client) Class(ctx context.Context, id uint32) (ClassInfo, error) {
	var info ClassInfo
	err := c.get(ctx, classPath(id), &info)
	return info, err
}

// AddClass installs a traffic class and returns it as the daemon stored it. The error
// satisfies errors.Is(err, ErrConflict) when the id is taken and errors.Is(err, ErrInvalid)
// when the daemon rejected the class; its text is then the daemon's, naming the field.
func (c *Client) AddClass(ctx context.Context, class classifier.Class) (ClassInfo, error) {
	body, err := json.Marshal(class)
	if err != nil {
		return ClassInfo{}, fmt.Errorf("encoding class %d: %w", class.ID, err)
	}
	var info ClassInfo
	err = c.do(ctx, http.MethodPost, classesPath, body, &info)
	return info, err
}

// DeleteClass removes a traffic class; the error satisfies errors.Is(err, ErrNotFound) when
// the daemon has no class with that id.
func (c *Client) DeleteClass(ctx context.Context, id uint32) error {
	return c.do(ctx, http.MethodDelete, classPath(id), nil, nil)
}

// Contracts returns every policer contract with its counters, sorted by class id; never nil.
func (c *Client) Contracts(ctx context.Context) ([]ContractInfo, error) {
	var list []ContractInfo
	if err := c.get(ctx, contractsPath, &list); err != nil {
		return nil, err
	}
	if list == nil {
		list = []ContractInfo{}
	}
	return list, nil
}

// Contract returns the policer contract of a class (0: the default contract); the error
// satisfies errors.Is(err, ErrNotFound) when the class has none.
func (c *Client) Contract(ctx context.Context, class uint32) (ContractInfo, error) {
	var info ContractInfo
	err := c.get(ctx, contractPath(class), &info)
	return info, err
}

// SetContract creates or replaces the policer contract of a class (0: the default contract)
// and returns it as the daemon stored it. The error satisfies errors.Is(err, ErrInvalid) when
// the daemon rejected the contract; its text is then the daemon's, naming the field.
func (c *Client) SetContract(ctx context.Context, class uint32, contract Contract) (ContractInfo, error) {
	body, err := json.Marshal(contract)
	if err != nil {
		return ContractInfo{}, fmt.Errorf("encoding the %s: %w", ContractName(class), err)
	}
	var info ContractInfo
	err = c.do(ctx, http.MethodPut, contractPath(class), body, &info)
	return info, err
}

// DeleteContract removes the policer contract of a class; the error satisfies
// errors.Is(err, ErrNotFound) when the class has none.
func (c *Client) DeleteContract(ctx context.Context, class uint32) error {
	return c.do(ctx, http.MethodDelete, contractPath(class), nil, nil)
}

const contractsPath = "/api/v1/policer/contracts"

func contractPath(class uint32) string {
	return contractsPath + "/" + strconv.FormatUint(uint64(class), 10)
}

// Associations returns the established PFCP associations, sorted by Node ID; never nil.
func (c *Client) Associations(ctx context.Context) ([]pfcp.Association, error) {
	var list []pfcp.Association
	if err := c.get(ctx, "/api/v1/pfcp/associations", &list); err != nil {
		return nil, err
	}
	if list == nil {
		list = []pfcp.Association{}
	}
	return list, nil
}

// PFCPSessions returns every session SMFs established over PFCP, sorted by SEID; never nil.
func (c *Client) PFCPSessions(ctx context.Context) ([]PFCPSessionInfo, error) {
	var list []PFCPSessionInfo
	if err := c.get(ctx, pfcpSessionsPath, &list); err != nil {
		return nil, err
	}
	if list == nil {
		list = []PFCPSessionInfo{}
	}
	return list, nil
}

// PFCPSession returns one PFCP session by this UPF's SEID; the error satisfies
// errors.Is(err, ErrNotFound) when the daemon has no PFCP session with that SEID.
func (c *Client) PFCPSession(ctx context.Context, seid uint64) (PFCPSessionInfo, error) {
	var info PFCPSessionInfo
	err := c.get(ctx, pfcpSessionsPath+"/"+strconv.FormatUint(seid, 10), &info)
	return info, err
}

const pfcpSessionsPath = "/api/v1/pfcp/sessions"

const classesPath = "/api/v1/classifier/classes"

func classPath(id uint32) string { return classesPath + "/" + strconv.FormatUint(uint64(id), 10) }

// maxErrorBody bounds what is read of an error response: a proxy or a wrong server can
// answer with a large page, and only a message is wanted from it.
const maxErrorBody = 64 << 10

// maxRawBody bounds a body taken as it is (the running configuration): a configuration of
// many static sessions and classes is a few MiB.
const maxRawBody = 64 << 20

func (c *Client) get(ctx context.Context, path string, out any) error {
	return c.do(ctx, http.MethodGet, path, nil, out)
}

// do sends a request with an optional JSON body and decodes the answer into out, unless out
// is nil (an answer without a body, such as 204); a *[]byte out takes the body as it is.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var reqBody io.Reader
	if body != nil {
		reqBody = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, reqBody)
	if err != nil {
		return fmt.Errorf("server address %q is not a valid URL; set --server or XUPF_SERVER to e.g. http://127.0.0.1:8080: %w", c.baseURL, err)
	}
	req.Header.Set("Accept", "application/json")
	// A token that cannot be read is only reported if the daemon asks for it: an
	// unreachable daemon or a wrong --server is the problem to show first.
	var tokenErr error
	if c.tokenFile != "" {
		token, err := ReadToken(c.tokenFile)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		tokenErr = err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var certErr *tls.CertificateVerificationError
		if errors.As(err, &certErr) {
			return fmt.Errorf("the daemon's TLS certificate at %s is not trusted; give the certificate of the CA that signed it "+
				"(the certificate itself if it is self-signed) with --ca-cert or XUPF_CA_CERT: %w", c.baseURL, err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the daemon at %s did not answer in time; check that xupfd is healthy, or raise --timeout: %w", c.baseURL, err)
		}
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("request to the daemon at %s canceled: %w", c.baseURL, err)
		}
		return fmt.Errorf("the daemon is not reachable at %s; check that xupfd runs and that --server or XUPF_SERVER points to its API address: %w", c.baseURL, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode == http.StatusUnauthorized && tokenErr != nil {
		return &ResponseError{StatusCode: resp.StatusCode, Message: "the daemon requires the API token, but the " + tokenErr.Error()}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return responseError(resp)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw, err = io.ReadAll(io.LimitReader(resp.Body, maxRawBody))
		if err != nil {
			return fmt.Errorf("reading the answer of %s%s: %w", c.baseURL, path, err)
		}
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the answer of %s%s (is --server the xupfd API address?): %w", c.baseURL, path, err)
	}
	return nil
}

func responseError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e Error
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		return &ResponseError{StatusCode: resp.StatusCode, Message: e.Error}
	}
	// Not our Error body: something else answered (a proxy, another service), so say what
	// came back instead of inventing a message.
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = "empty body"
	}
	return &ResponseError{
		StatusCode: resp.StatusCode,
		Message:    fmt.Sprintf("%s from %s: %s", resp.Status, resp.Request.URL, msg),
	}
}
