package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/broker/auth"
	"github.com/streamcast/streamcast/pkg/meta"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// Version is the control API's contract version.
const Version = 1

// Prefix is where the API is served.
const Prefix = "/control/v1"

// ErrorBody is the body of every refusal: {"error": ErrorBody}. Its
// message never holds a path, a credential or a row.
type ErrorBody struct {
	Code        string  `json:"code"`
	Message     string  `json:"message"`
	Retryable   bool    `json:"retryable"`
	OperationID *string `json:"operation_id"`
}

// apiError is a refusal with its status.
type apiError struct {
	status int
	body   ErrorBody
}

func (e *apiError) Error() string { return e.body.Message }

func refuse(status int, code, format string, a ...any) *apiError {
	return &apiError{status: status, body: ErrorBody{Code: code, Message: fmt.Sprintf(format, a...), Retryable: status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable}}
}

// ServeHTTP serves the API under Prefix; the server's middleware has
// authenticated the request (auth.AccessOf), and each route checks its
// grant before it reads a body or looks a stream up.
func (c *Controller) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := c.route(w, r); err != nil {
		writeError(w, err)
	}
}

func (c *Controller) route(w http.ResponseWriter, r *http.Request) *apiError {
	rest, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		return refuse(http.StatusNotFound, "not_found", "no such resource")
	}
	parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if rest == "" || rest == "/" {
		parts = nil
	}
	method := r.Method
	switch {
	case len(parts) == 0:
		return c.only(method, http.MethodGet, func() *apiError { return c.getRoot(w, r) })
	case parts[0] == "streams" && len(parts) == 1:
		return c.only(method, http.MethodGet, func() *apiError { return c.list(w, r) })
	case parts[0] == "streams" && len(parts) == 2:
		switch method {
		case http.MethodGet, http.MethodHead:
			return c.getStream(w, r, parts[1])
		case http.MethodPut:
			return c.putStream(w, r, parts[1])
		}
		w.Header().Set("Allow", "GET, PUT")
		return refuse(http.StatusMethodNotAllowed, "method_not_allowed", "%s takes GET or PUT", r.URL.Path)
	case parts[0] == "streams" && len(parts) == 3 && parts[2] == "desired":
		return c.only(method, http.MethodPut, func() *apiError { return c.putDesired(w, r, parts[1]) })
	case parts[0] == "streams" && len(parts) == 3 && parts[2] == "migrations":
		return c.only(method, http.MethodPost, func() *apiError { return c.postMigration(w, r, parts[1]) })
	case parts[0] == "operations" && len(parts) == 2:
		return c.only(method, http.MethodGet, func() *apiError { return c.getOperation(w, r, parts[1]) })
	}
	return refuse(http.StatusNotFound, "not_found", "no such resource; the API serves %s, %s/streams, %s/streams/{name} and %s/operations/{id}", Prefix, Prefix, Prefix, Prefix)
}

func (c *Controller) only(method, want string, f func() *apiError) *apiError {
	if method != want && !(want == http.MethodGet && method == http.MethodHead) {
		return &apiError{status: http.StatusMethodNotAllowed, body: ErrorBody{Code: "method_not_allowed", Message: "this resource takes " + want}}
	}
	return f()
}

// grant checks the request's principal holds action on stream (on some
// stream when stream is "").
func grant(r *http.Request, action, stream string) *apiError {
	a := auth.AccessOf(r)
	ok := a.Allows(action, stream)
	what := fmt.Sprintf("%s stream %q", action, stream)
	if stream == "" {
		ok, what = a.Any(action), "use the control API (it needs the "+action+" grant on some stream)"
	}
	if ok {
		return nil
	}
	return grantRefusal(a, what)
}

// grantRefusal is the refusal of a principal without the grant for what:
// 401 without credentials, 403 with.
func grantRefusal(a auth.Access, what string) *apiError {
	status, msg := auth.Refusal(a, what)
	code := "forbidden"
	if status == http.StatusUnauthorized {
		code = "unauthenticated"
	}
	return refuse(status, code, "%s", msg)
}

// getRoot answers GET /control/v1: the contract and the server's bounds.
func (c *Controller) getRoot(w http.ResponseWriter, r *http.Request) *apiError {
	if err := grant(r, config.ActionControl, ""); err != nil {
		return err
	}
	cc := c.cfg.Control
	type profile struct {
		Name      string `json:"name"`
		Replicate bool   `json:"replicate"`
	}
	profiles := []profile{}
	for _, n := range cc.ProfileNames() {
		profiles = append(profiles, profile{n, cc.Profiles[n].Replicate})
	}
	protected := slices.Sorted(slices.Values(append([]string{}, cc.Protected...)))
	writeJSON(w, http.StatusOK, map[string]any{
		"version":   Version,
		"broker_id": c.reg.BrokerID(),
		"boot_id":   c.bootID,
		"bounds": map[string]any{
			"max_pending":       cc.MaxPending,
			"max_bytes":         cc.MaxBytes,
			"max_page":          maxPage,
			"max_message_bytes": c.cfg.Limits.MaxMessageBytes,
		},
		"profiles":      profiles,
		"protected":     protected,
		"wire_versions": []int{4},
	})
	return nil
}

const (
	defaultPage = 100
	maxPage     = 1000
)

// list answers GET /control/v1/streams?limit=&cursor=: a page by name.
func (c *Controller) list(w http.ResponseWriter, r *http.Request) *apiError {
	if err := grant(r, config.ActionControl, ""); err != nil {
		return err
	}
	q := r.URL.Query()
	limit := defaultPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPage {
			return refuse(http.StatusBadRequest, "bad_request", "limit %q is not a number from 1 to %d", clipped(s), maxPage)
		}
		limit = n
	}
	after, rev := "", int64(-1)
	if s := q.Get("cursor"); s != "" {
		var ok bool
		if rev, after, ok = parseCursor(s); !ok {
			return refuse(http.StatusBadRequest, "bad_request", "cursor is not one this API issued; start from the first page (no cursor)")
		}
	}
	// The grant filters the records before the page is cut and its cursor
	// made: a cursor names the last stream of the page the caller was
	// shown, never one it may not see.
	acc := auth.AccessOf(r)
	visible := func(name string) bool { return acc.Allows(config.ActionControl, name) }
	recs, cur, err := c.reg.page(r.Context(), after, limit+1, visible)
	if err != nil {
		return c.internal(err)
	}
	if rev >= 0 && rev != cur {
		return refuse(http.StatusConflict, "stale_cursor", "the streams changed since this cursor was issued (revision %d, now %d); start again from the first page", rev, cur)
	}
	// The config file's streams are listed too, in name order among the
	// registered ones, marked "source": "config": a client sees every
	// stream the server serves, under the same grant filter.
	items := []map[string]any{}
	statics := c.rt.Statics()
	for len(items) <= limit && (len(recs) > 0 || len(statics) > 0) {
		if len(statics) > 0 && (statics[0].Name <= after || !visible(statics[0].Name)) {
			statics = statics[1:]
			continue
		}
		if len(statics) > 0 && (len(recs) == 0 || statics[0].Name < recs[0].Name) {
			items = append(items, c.staticView(statics[0]))
			statics = statics[1:]
			continue
		}
		rec := recs[0]
		recs = recs[1:]
		items = append(items, map[string]any{
			"name":      rec.Name,
			"source":    SourceControl,
			"desired":   rec.Desired,
			"revision":  rec.Revision,
			"stream_id": nullable(rec.StreamID),
			"observed":  c.observation(rec.Name),
		})
	}
	var next any
	if len(items) > limit {
		items = items[:limit]
		next = makeCursor(cur, items[len(items)-1]["name"].(string))
	}
	writeJSON(w, http.StatusOK, map[string]any{"revision": cur, "streams": items, "next_cursor": next})
	return nil
}

// Where a listed stream is declared: the config file's streams: list,
// or the control API's registry.
const (
	SourceConfig  = "config"
	SourceControl = "control"
)

// staticView is a stream of the config file as the API shows it: served
// for as long as the file declares it, with no declaration, revision or
// ETag of the API's.
func (c *Controller) staticView(st StaticStream) map[string]any {
	a := c.rt.Serves(st.Name)
	state := ObservedStopped
	if a.Served {
		state = ObservedServing
	}
	return map[string]any{
		"name":      st.Name,
		"source":    SourceConfig,
		"desired":   Serving,
		"revision":  nil,
		"stream_id": nullable(st.StreamID),
		"observed": Observed{State: state, BootID: c.bootID, At: time.Now().Unix(),
			ReadAdmission: a.Served && a.Read, WriteAdmit: a.Served && a.Write, ChildrenReady: a.ChildrenReady},
	}
}

// getStream answers GET /control/v1/streams/{name}, with an ETag.
func (c *Controller) getStream(w http.ResponseWriter, r *http.Request, name string) *apiError {
	if err := grant(r, config.ActionControl, name); err != nil {
		return err
	}
	var rec *Record
	var pending *Operation
	err := c.reg.read(r.Context(), func(t tx) (err error) {
		if rec, err = t.stream(name); err != nil || rec == nil {
			return err
		}
		pending, err = t.pendingOf(name)
		return err
	})
	if err != nil {
		return c.internal(err)
	}
	if rec == nil {
		for _, st := range c.rt.Statics() {
			if st.Name == name {
				v := c.staticView(st)
				v["declaration"] = nil
				writeJSON(w, http.StatusOK, v)
				return nil
			}
		}
		return notFound(name)
	}
	w.Header().Set("ETag", etag(rec.Revision))
	p := c.cfg.Control.Profiles[rec.Declaration.StorageProfile]
	writeJSON(w, http.StatusOK, map[string]any{
		"name":              rec.Name,
		"source":            SourceControl,
		"declaration":       rec.Declaration,
		"desired":           rec.Desired,
		"observed":          c.observation(name),
		"revision":          rec.Revision,
		"stream_id":         nullable(rec.StreamID),
		"pending_operation": pending,
		"profile":           map[string]any{"name": rec.Declaration.StorageProfile, "replicate": p.Replicate},
	})
	return nil
}

// getOperation answers GET /control/v1/operations/{id}.
func (c *Controller) getOperation(w http.ResponseWriter, r *http.Request, id string) *apiError {
	if err := grant(r, config.ActionControl, ""); err != nil {
		return err
	}
	op, err := c.reg.Operation(r.Context(), id)
	if err != nil {
		return c.internal(err)
	}
	if op == nil {
		return refuse(http.StatusNotFound, "not_found", "no operation %q; an operation is kept 7 days after it ends", clipped(id))
	}
	// An operation id is unguessable: whoever holds one was given it, so
	// refusing it with 403 tells nothing of which streams exist. The
	// refusal does not name the operation's stream.
	if a := auth.AccessOf(r); !a.Allows(config.ActionControl, op.Stream) {
		return grantRefusal(a, fmt.Sprintf("read operation %q (it needs the control grant on the operation's stream)", clipped(id)))
	}
	writeJSON(w, http.StatusOK, op)
	return nil
}

// mutation is a request that changes the registry, read and checked up to
// the point where the registry is consulted.
type mutation struct {
	name      string
	principal string
	key       string
	hash      string
	body      []byte
	ifMatch   string // "" when absent
	ifNone    bool   // If-None-Match: *
}

// readMutation applies the rules every mutation shares, in order: the
// grant, Content-Type (415), Idempotency-Key (428, 400), the body's size
// before it is read whole (413), its JSON (400) and the preconditions'
// syntax (400 for both at once).
func (c *Controller) readMutation(w http.ResponseWriter, r *http.Request, name, action string) (*mutation, *apiError) {
	if err := grant(r, action, name); err != nil {
		return nil, err
	}
	if err := checkName(name); err != nil {
		return nil, err
	}
	if rf := checkContentType(r.Header.Get("Content-Type")); rf != nil {
		return nil, rf
	}
	key, rf := checkIdempotencyKey(r.Header.Values("Idempotency-Key"))
	if rf != nil {
		return nil, rf
	}
	max := int64(c.cfg.Control.MaxBytes)
	if r.ContentLength > max {
		return nil, tooLarge(max)
	}
	body, rerr := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if rerr != nil {
		var mbe *http.MaxBytesError
		if errors.As(rerr, &mbe) {
			return nil, tooLarge(max)
		}
		return nil, refuse(http.StatusBadRequest, "bad_request", "the body could not be read whole: %v", rerr)
	}
	if err := checkJSON(body); err != nil {
		return nil, refuse(http.StatusBadRequest, "malformed_json", "%v", err)
	}
	m := &mutation{name: name, principal: auth.AccessOf(r).Who, key: key, body: body}
	m.ifMatch, m.ifNone, rf = checkPreconditions(r.Header.Values("If-Match"), r.Header.Values("If-None-Match"))
	if rf != nil {
		return nil, rf
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, body)
	h := sha256.New()
	for _, part := range []string{r.Method, r.URL.Path, compact.String(), m.ifMatch, strconv.FormatBool(m.ifNone)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	m.hash = hex.EncodeToString(h.Sum(nil))
	return m, nil
}

func tooLarge(max int64) *apiError {
	return refuse(http.StatusRequestEntityTooLarge, "too_large", "the body is over control.max_bytes, %d bytes; send a smaller declaration", max)
}

func checkName(name string) *apiError {
	if err := meta.CheckName(name); err != nil {
		return refuse(http.StatusBadRequest, "bad_name", "stream name %q %v", clipped(name), err)
	}
	return nil
}

// matches checks If-Match against the stream's revision: missing is 428,
// malformed or stale 412.
func (m *mutation) matches(rec *Record) *apiError {
	if m.ifNone {
		return refuse(http.StatusPreconditionFailed, "precondition_failed", "stream %q exists already; GET it and send If-Match with its ETag to replace it", m.name)
	}
	if m.ifMatch == "" {
		return refuse(http.StatusPreconditionRequired, "precondition_required", "this change needs If-Match with the stream's ETag (GET /control/v1/streams/%s)", m.name)
	}
	if m.ifMatch != etag(rec.Revision) {
		return refuse(http.StatusPreconditionFailed, "precondition_failed", "If-Match %s is not the stream's ETag %s: it changed since you read it; GET it again", clipped(m.ifMatch), etag(rec.Revision))
	}
	return nil
}

func etag(rev int64) string { return `"` + strconv.FormatInt(rev, 10) + `"` }

// answer is what a mutation answers, stored as its receipt.
type answer struct {
	status int
	body   []byte
	loc    string
	etag   string
}

// commit runs the mutation's registry work in one transaction with its
// operation and its receipt, and answers. f returns the answer of a
// change (an operation to record, accepted) or of a no-op (succeeded at
// once). A no-op records no operation, only its receipt: it changes
// nothing, and an operation holds its whole target (a declaration of up
// to control.max_bytes), so repeating a no-op would otherwise grow the
// registry by that much each time. An identical retry gets the receipt's
// answer before anything else is checked; the same key with another
// request gets 409.
func (c *Controller) commit(w http.ResponseWriter, r *http.Request, m *mutation, f func(t tx) (*change, *apiError)) *apiError {
	var ans *answer
	var refusal *apiError
	err := c.reg.update(contextWithoutCancel(r), func(t tx) error {
		rc, err := t.receipt(m.principal, m.key)
		if err != nil {
			return err
		}
		if rc != nil {
			if rc.Hash != m.hash {
				refusal = refuse(http.StatusConflict, "idempotency_key_reused", "this Idempotency-Key was used for another request; use a new key for a new request")
				return errRollback
			}
			ans = &answer{rc.Status, rc.Body, rc.Location, rc.ETag}
			return errRollback
		}
		ch, ref := f(t)
		if ref != nil {
			refusal = ref
			return errRollback
		}
		if ch.noop {
			// The stream is the answer's resource: there is no operation
			// to poll.
			body, _ := json.Marshal(map[string]any{"status": StatusSucceeded, "operation_id": nil, "revision": ch.rec.Revision, "name": m.name})
			ans = &answer{http.StatusOK, body, Prefix + "/streams/" + m.name, etag(ch.rec.Revision)}
			return t.putReceipt(m.principal, m.key, &Receipt{Hash: m.hash, Status: ans.status, Body: ans.body, Location: ans.loc, ETag: ans.etag})
		}
		n, err := t.pending()
		if err != nil {
			return err
		}
		if n >= c.cfg.Control.MaxPending {
			refusal = refuse(http.StatusTooManyRequests, "capacity", "%d operations are in flight, control.max_pending; retry in a second", n)
			return errRollback
		}
		if err := t.putStream(ch.rec); err != nil {
			return err
		}
		if err := t.bumpCollection(); err != nil {
			return err
		}
		op, err := t.newOp(m.name, ch.kind, ch.rec.Revision, ch.target, StatusAccepted)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"status": StatusAccepted, "operation_id": op.ID, "revision": ch.rec.Revision, "name": m.name})
		ans = &answer{http.StatusAccepted, body, Prefix + "/operations/" + op.ID, etag(ch.rec.Revision)}
		return t.putReceipt(m.principal, m.key, &Receipt{Hash: m.hash, Status: ans.status, Body: ans.body, Location: ans.loc, ETag: ans.etag})
	})
	if refusal != nil {
		return refusal
	}
	if err != nil && !errors.Is(err, errRollback) {
		return c.internal(err)
	}
	if testHookAfterCommit != nil {
		testHookAfterCommit()
	}
	c.poke()
	w.Header().Set("Location", ans.loc)
	w.Header().Set("ETag", ans.etag)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
	return nil
}

// contextWithoutCancel is r's context without its cancellation: once a
// mutation is read, a client that goes away does not cancel it.
func contextWithoutCancel(r *http.Request) context.Context {
	return context.WithoutCancel(r.Context())
}

// errRollback ends a transaction with nothing to commit.
var errRollback = errors.New("rollback")

// change is what a mutation does to a stream.
type change struct {
	rec    *Record // the stream after the change
	kind   string
	target any
	noop   bool
}

// putStream answers PUT /control/v1/streams/{name}: create with
// If-None-Match: *, replace with If-Match.
func (c *Controller) putStream(w http.ResponseWriter, r *http.Request, name string) *apiError {
	m, err := c.readMutation(w, r, name, config.ActionControl)
	if err != nil {
		return err
	}
	d, derr := ParseDeclaration(m.body)
	var inv *invalid
	if errors.As(derr, &inv) {
		return refuse(http.StatusUnprocessableEntity, "unsupported_declaration", "%v", derr)
	}
	if derr != nil {
		return refuse(http.StatusBadRequest, "malformed_json", "%v", derr)
	}
	if ref := c.refuseStatic(name); ref != nil {
		return ref
	}
	if p := c.cfg.Stats.Path(); p != "" && strings.EqualFold(p, "/"+name) {
		return refuse(http.StatusConflict, "stats_path", "stream %q would be served at %s, where the server serves its stats (stats: in its config); choose another name", name, p)
	}
	if _, derr := d.Check(c.cfg); derr != nil {
		return refuse(http.StatusUnprocessableEntity, "unsupported_declaration", "%v", derr)
	}
	return c.commit(w, r, m, func(t tx) (*change, *apiError) {
		cur, err := t.stream(name)
		if err != nil {
			return nil, c.internal(err)
		}
		if cur == nil {
			if m.ifMatch != "" {
				return nil, refuse(http.StatusPreconditionFailed, "precondition_failed", "stream %q does not exist, so If-Match cannot match; create it with If-None-Match: *", name)
			}
			if !m.ifNone {
				return nil, refuse(http.StatusPreconditionRequired, "precondition_required", "creating stream %q needs If-None-Match: *", name)
			}
			// Checked in the transaction that inserts the name, so two
			// creates racing cannot both pass it.
			other, err := t.streamFolded(name)
			if err != nil {
				return nil, c.internal(err)
			}
			if other != "" {
				return nil, refuse(http.StatusConflict, "name_differs_only_in_case", "stream %q differs only in case from the registered stream %q; "+
					"on a case-insensitive file system the two would share a directory, so choose a name that differs in more than case, or change %q (PUT /control/v1/streams/%s)", name, other, other, other)
			}
			return &change{rec: &Record{Name: name, Declaration: d, Desired: Stopped, Revision: 1}, kind: KindCreate, target: d}, nil
		}
		if ref := m.matches(cur); ref != nil {
			return nil, ref
		}
		if equalDecl(cur.Declaration, d) {
			return &change{rec: cur, kind: KindReplace, target: d, noop: true}, nil
		}
		if cur.Desired == Retired {
			return nil, refuse(http.StatusConflict, "retired", "stream %q is retired; its declaration no longer changes", name)
		}
		if cur.StreamID != "" && d.StorageProfile != cur.Declaration.StorageProfile {
			return nil, refuse(http.StatusConflict, "profile_bound", "stream %q is bound to storage_profile %q; a bound stream's profile never changes", name, cur.Declaration.StorageProfile)
		}
		if cur.StreamID != "" && !equalDecl(withSchemaOf(d, cur.Declaration), d) {
			return nil, refuse(http.StatusConflict, "needs_migration", "stream %q has a log: its schema and sort_by change only by a migration (POST /control/v1/streams/%s/migrations)", name, name)
		}
		if !sameButSchema(cur.Declaration, d) && (cur.Desired != Stopped || c.observation(name).State != ObservedStopped) {
			return nil, refuse(http.StatusConflict, "not_stopped", "stream %q must be stopped (desired and observed) before its declaration changes; set desired to stopped, wait for the operation, then retry", name)
		}
		next := *cur
		next.Declaration = d
		next.Revision++
		return &change{rec: &next, kind: KindReplace, target: d}, nil
	})
}

// refuseStatic refuses a change to name when it is, or differs only in
// case from, a stream of the server's config file, which the control
// API never manages.
func (c *Controller) refuseStatic(name string) *apiError {
	static, ok := c.rt.Static(name)
	switch {
	case !ok:
		return nil
	case static == name:
		return refuse(http.StatusConflict, "static_stream", "stream %q is in the server's config file (streams:), which the control API does not manage; "+
			"change it there and reload the server (SIGHUP); a name can be only one", name)
	}
	return refuse(http.StatusConflict, "name_differs_only_in_case", "stream %q differs only in case from the stream %q in the server's config file (streams:); "+
		"on a case-insensitive file system the two would share a directory, so choose a name that differs in more than case", name, static)
}

func withSchemaOf(d, from Declaration) Declaration {
	d.Schema, d.SortBy = from.Schema, from.SortBy
	return d
}

// putDesired answers PUT /control/v1/streams/{name}/desired.
func (c *Controller) putDesired(w http.ResponseWriter, r *http.Request, name string) *apiError {
	m, err := c.readMutation(w, r, name, config.ActionControl)
	if err != nil {
		return err
	}
	if ref := c.refuseStatic(name); ref != nil {
		return ref
	}
	var b desiredBody
	if derr := decodeStrict(m.body, &b); derr != nil {
		return refuse(http.StatusBadRequest, "malformed_json", "%v", derr)
	}
	if b.State != Serving && b.State != Stopped && b.State != Retired {
		return refuse(http.StatusUnprocessableEntity, "bad_state", "state %q is not serving, stopped or retired", clipped(b.State))
	}
	if b.State == Retired && slices.Contains(c.cfg.Control.Protected, name) {
		return refuse(http.StatusForbidden, "protected", "stream %q is protected (control.protected): its consumers rebuild from offset 1, so it is never retired", name)
	}
	return c.commit(w, r, m, func(t tx) (*change, *apiError) {
		cur, ref := c.existing(t, m)
		if ref != nil {
			return nil, ref
		}
		if cur.Desired == b.State {
			return &change{rec: cur, kind: KindDesired, target: b, noop: true}, nil
		}
		if cur.Desired == Retired {
			return nil, refuse(http.StatusConflict, "retired", "stream %q is retired, which is terminal; it stays served for replay and takes no rows", name)
		}
		next := *cur
		next.Desired = b.State
		next.Revision++
		return &change{rec: &next, kind: KindDesired, target: b}, nil
	})
}

// postMigration answers POST /control/v1/streams/{name}/migrations.
func (c *Controller) postMigration(w http.ResponseWriter, r *http.Request, name string) *apiError {
	m, err := c.readMutation(w, r, name, config.ActionMigrate)
	if err != nil {
		return err
	}
	if ref := c.refuseStatic(name); ref != nil {
		return ref
	}
	var mg Migration
	if derr := decodeStrict(m.body, &mg); derr != nil {
		return refuse(http.StatusBadRequest, "malformed_json", "%v", derr)
	}
	if mg.SortBy == nil {
		mg.SortBy = []string{}
	}
	mg.Schema = compactJSON(mg.Schema)
	if slices.Contains(c.cfg.Control.Protected, name) {
		return refuse(http.StatusForbidden, "protected", "stream %q is protected (control.protected): its consumers rebuild from offset 1, so it is never migrated", name)
	}
	return c.commit(w, r, m, func(t tx) (*change, *apiError) {
		cur, ref := c.existing(t, m)
		if ref != nil {
			return nil, ref
		}
		switch {
		case cur.Desired == Retired:
			return nil, refuse(http.StatusConflict, "retired", "stream %q is retired; a retired stream is never migrated", name)
		case cur.StreamID == "":
			return nil, refuse(http.StatusConflict, "unbound", "stream %q has no log yet; replace its declaration instead (PUT /control/v1/streams/%s)", name, name)
		case mg.StreamID != cur.StreamID:
			return nil, refuse(http.StatusConflict, "stream_id", "stream_id %q is not the stream's, %s; a migration names the identity it moves", clipped(mg.StreamID), cur.StreamID)
		}
		nd := cur.Declaration
		nd.Schema, nd.SortBy = mg.Schema, mg.SortBy
		if _, err := nd.Check(c.cfg); err != nil {
			return nil, refuse(http.StatusUnprocessableEntity, "unsupported_declaration", "%v", err)
		}
		if equalDecl(nd, cur.Declaration) {
			return &change{rec: cur, kind: KindMigrate, target: mg, noop: true}, nil
		}
		next := *cur
		next.Revision++
		return &change{rec: &next, kind: KindMigrate, target: mg}, nil
	})
}

// existing reads the stream a mutation names, which must exist and match
// its If-Match.
func (c *Controller) existing(t tx, m *mutation) (*Record, *apiError) {
	cur, err := t.stream(m.name)
	if err != nil {
		return nil, c.internal(err)
	}
	if cur == nil {
		return nil, notFound(m.name)
	}
	if ref := m.matches(cur); ref != nil {
		return nil, ref
	}
	return cur, nil
}

func notFound(name string) *apiError {
	return refuse(http.StatusNotFound, "not_found", "stream %q does not exist: the server serves no stream of that name; GET %s/streams lists those it serves, and PUT with If-None-Match: * declares one", name, Prefix)
}

// internal hides an error from below (it may name a path) behind a
// generic 503; the server's log is where an operator reads it.
func (c *Controller) internal(err error) *apiError {
	c.logger.Error("control: the registry failed", "err", err)
	return refuse(http.StatusServiceUnavailable, "unavailable", "the control registry could not be read or written; retry in a second, and see the server's log if it persists")
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.body.Retryable {
		w.Header().Set("Retry-After", "1")
	}
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", auth.Challenge)
	}
	writeJSON(w, e.status, map[string]any{"error": e.body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"the answer could not be encoded","retryable":false,"operation_id":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func clipped(s string) string { return clip(strings.ToValidUTF8(s, "?")) }
