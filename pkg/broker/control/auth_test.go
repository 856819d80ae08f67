package control_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/streamcast/streamcast/pkg/broker/control"
	"github.com/streamcast/streamcast/pkg/meta/config"
)

// TestControlNeedsItsGrantsAndMigrateItsOwn: without credentials the API
// answers 401 with a challenge; a user without the control grant on a
// stream gets 403 and does not see it listed; control alone does not
// migrate, which needs the migrate grant.
func TestControlNeedsItsGrantsAndMigrateItsOwn(t *testing.T) {
	root := t.TempDir()
	cfg := opsAndDevConfig(t, root, "control", "migrate", "publish", "read")
	f := serveWith(t, cfg)
	as := func(user string, q req) resp {
		if q.hdr == nil {
			q.hdr = map[string]string{}
		}
		hr, _ := http.NewRequest("GET", "http://x", nil)
		hr.SetBasicAuth(user, "pw")
		q.hdr["Authorization"] = hr.Header.Get("Authorization")
		return f.do(t, q)
	}
	if r := f.do(t, req{"GET", "/control/v1", "", nil}); r.status != http.StatusUnauthorized || r.hdr.Get("WWW-Authenticate") == "" || r.errCode() != "unauthenticated" {
		t.Errorf("anonymous GET /control/v1: %d %v %s", r.status, r.hdr, r.body)
	}
	for _, n := range []string{"prod", "dev.x"} {
		if r := as("ops", req{"PUT", "/control/v1/streams/" + n, decl("create_if_absent"), mut("*")}); r.status != http.StatusAccepted {
			t.Fatalf("ops creates %s: %d %s", n, r.status, r.body)
		}
	}
	if r := as("dev", req{"PUT", "/control/v1/streams/prod/desired", `{"state":"serving"}`, mut(`"1"`)}); r.status != http.StatusForbidden || r.errCode() != "forbidden" {
		t.Errorf("dev sets prod's desired state: %d %s", r.status, r.body)
	}
	if r := as("dev", req{"GET", "/control/v1/streams", "", nil}); r.status != http.StatusOK || strings.Contains(string(r.body), `"prod"`) || !strings.Contains(string(r.body), `"dev.x"`) {
		t.Errorf("dev's list: %d %s; want dev.x and not prod", r.status, r.body)
	}
	if r := as("dev", req{"POST", "/control/v1/streams/dev.x/migrations", `{"stream_id":"x","schema":{}}`, mut(`"1"`)}); r.status != http.StatusForbidden {
		t.Errorf("dev migrates dev.x without the migrate grant: %d %s", r.status, r.body)
	}
	if r := as("ops", req{"POST", "/control/v1/streams/dev.x/migrations", `{"stream_id":"x","schema":{}}`, mut(`"1"`)}); r.status == http.StatusForbidden || r.status == http.StatusUnauthorized {
		t.Errorf("ops, with the migrate grant, was refused: %d %s", r.status, r.body)
	}
}

// TestReloadLeavesRegisteredStreamsServing: a reload applies the config
// file's streams and leaves the registry's alone.
func TestReloadLeavesRegisteredStreamsServing(t *testing.T) {
	f := start(t)
	f.create(t, "trades")
	f.setDesired(t, "trades", "serving")
	if err := f.srv.Reload(serveConfig(f.root)); err != nil {
		t.Fatal(err)
	}
	if rep := publish(t, f.ws, "trades", 0, 1); rep["ok"] == nil {
		t.Errorf("after a reload the registered stream refused a row: %v", rep)
	}
}

// opsAndDevConfig is a server over root with a registry and an auth:
// section of two users, both with password "pw": ops holds opsActions on
// every stream, dev holds control on dev.* only.
func opsAndDevConfig(t *testing.T, root string, opsActions ...string) config.Config {
	t.Helper()
	cfg := serveConfig(root)
	if _, err := control.Init(context.Background(), cfg.RegistryPath()); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth = &config.Auth{
		Users: []config.User{{Name: "ops", PasswordHash: string(hash)}, {Name: "dev", PasswordHash: string(hash)}},
		Grants: []config.Grant{
			{Principals: []string{"ops"}, Actions: opsActions, Streams: []string{"*"}},
			{Principals: []string{"dev"}, Actions: []string{"control"}, Streams: []string{"dev.*"}},
		},
	}
	return cfg
}

// TestAnOperationOnAStreamWithoutTheGrantIs403: a user holding an
// operation's id but not the control grant on its stream gets 403, as
// for the stream itself, and the refusal does not name the stream; an
// id that names no operation stays 404. A stream route answers by the
// grant before it looks the stream up, so 403 and 404 tell nothing of
// which streams exist that the caller may not control.
func TestAnOperationOnAStreamWithoutTheGrantIs403(t *testing.T) {
	root := t.TempDir()
	cfg := opsAndDevConfig(t, root, "control")
	f := serveWith(t, cfg)
	as := func(user string, q req) resp {
		hr, _ := http.NewRequest("GET", "http://x", nil)
		hr.SetBasicAuth(user, "pw")
		if q.hdr == nil {
			q.hdr = map[string]string{}
		}
		q.hdr["Authorization"] = hr.Header.Get("Authorization")
		return f.do(t, q)
	}
	r := as("ops", req{"PUT", "/control/v1/streams/prod", decl("create_if_absent"), mut("*")})
	if r.status != http.StatusAccepted {
		t.Fatalf("ops creates prod: %d %s", r.status, r.body)
	}
	loc := r.hdr.Get("Location")
	if r := as("dev", req{"GET", loc, "", nil}); r.status != http.StatusForbidden || r.errCode() != "forbidden" || strings.Contains(string(r.body), "prod") {
		t.Errorf("dev reads prod's operation: %d %s; want 403 not naming the stream", r.status, r.body)
	}
	if r := as("dev", req{"GET", "/control/v1/operations/0123456789abcdef0123456789abcdef", "", nil}); r.status != http.StatusNotFound {
		t.Errorf("dev reads an operation that does not exist: %d %s; want 404", r.status, r.body)
	}
	for _, name := range []string{"prod", "nosuch"} {
		if r := as("dev", req{"GET", "/control/v1/streams/" + name, "", nil}); r.status != http.StatusForbidden {
			t.Errorf("dev reads stream %s: %d %s; want 403 whether it exists or not", name, r.status, r.body)
		}
	}
}
