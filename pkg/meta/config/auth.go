package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/crypto/bcrypt"
)

// Principals a grant may name beside user names.
const (
	// PrincipalAnonymous is a request without credentials. A grant to it
	// is a grant to everyone: credentials never take access away.
	PrincipalAnonymous = "anonymous"
	// PrincipalAnyUser is any authenticated user.
	PrincipalAnyUser = "*"
)

// Actions a grant may give, each per stream.
const (
	ActionRead    = "read"    // subscribe to the stream
	ActionPublish = "publish" // publish rows to it
	ActionStats   = "stats"   // see it in /stats; on "*", the process figures and /metrics too
	ActionControl = "control" // declare, start, stop and retire it over /control/v1, and read its registration
	ActionMigrate = "migrate" // migrate it over /control/v1 (control alone does not)
)

// Actions lists the actions a grant may give.
func Actions() []string {
	return []string{ActionRead, ActionPublish, ActionStats, ActionControl, ActionMigrate}
}

// Auth is the auth: section: who may connect (users, checked with HTTP
// Basic authentication against a bcrypt hash) and what each may do with
// which streams (grants). A nil *Auth, no auth: section, lets everyone do
// everything; a section with no grants lets nobody do anything.
type Auth struct {
	// Users are the accounts Basic authentication checks.
	Users []User `yaml:"users"`
	// Grants give principals actions on streams; what no grant gives is
	// refused (401 without credentials, 403 with).
	Grants []Grant `yaml:"grants"`
}

// User is one account.
type User struct {
	// Name is the user name clients send; it names the user in grants.
	Name string `yaml:"name"`
	// PasswordHash is the bcrypt hash of the user's password, as
	// `streamcast auth hash` prints it. The password itself is never config.
	PasswordHash string `yaml:"password_hash" secret:"true"`
}

// Grant gives each of its principals each of its actions on each of its
// streams.
type Grant struct {
	// Principals are user names, "*" (any authenticated user) or
	// "anonymous" (a request without credentials, and so everyone).
	Principals []string `yaml:"principals"`
	// Actions are read, publish, stats, control and migrate.
	Actions []string `yaml:"actions"`
	// Streams are exact stream names, or a prefix followed by * ("fx.*",
	// and "*" for every stream).
	Streams []string `yaml:"streams"`
}

// MatchStream reports whether the grant's stream pattern p (an exact name,
// or a prefix ending in *) covers stream.
func MatchStream(p, stream string) bool {
	if prefix, ok := strings.CutSuffix(p, "*"); ok {
		return strings.HasPrefix(stream, prefix)
	}
	return p == stream
}

// Validate checks the section: user names given, distinct, usable in
// Basic authentication and not a reserved principal; every hash a bcrypt
// hash; every grant naming known principals, known actions and stream
// patterns. Its errors name the key and never quote a hash.
func (a *Auth) Validate() error { return a.validate(false) }

// validate is Validate; with certNames, a grant may also name a principal
// that is no user: the common name of a client certificate, when serve
// runs mutual TLS.
func (a *Auth) validate(certNames bool) error {
	if a == nil {
		return nil
	}
	users := map[string]int{}
	for i, u := range a.Users {
		key := fmt.Sprintf("auth.users[%d]", i)
		switch {
		case u.Name == "":
			return keyErrorf(key+".name", "%s.name is empty; give the user name clients send", key)
		case u.Name == PrincipalAnonymous || u.Name == PrincipalAnyUser:
			return keyErrorf(key+".name", "%s.name %q is reserved: in grants it means %s; choose another name", key, u.Name, principalMeaning(u.Name))
		case strings.ContainsRune(u.Name, ':'):
			return keyErrorf(key+".name", "%s.name %q contains ':', which HTTP Basic authentication cannot carry in a user name; choose a name without it", key, u.Name)
		case strings.ContainsFunc(u.Name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }):
			return keyErrorf(key+".name", "%s.name %q contains a space or an unprintable character; choose a name without them", key, u.Name)
		}
		if j, dup := users[u.Name]; dup {
			return keyErrorf(key+".name", "%s.name %q is already the name of auth.users[%d]; user names must be distinct", key, u.Name, j)
		}
		users[u.Name] = i
		if err := checkHash(u.PasswordHash); err != nil {
			return keyErrorf(key+".password_hash", "%s.password_hash (user %q) %v", key, u.Name, err)
		}
	}
	for i, g := range a.Grants {
		key := fmt.Sprintf("auth.grants[%d]", i)
		for _, l := range []struct {
			name string
			v    []string
			want string
		}{
			{"principals", g.Principals, "user names, \"*\" or \"anonymous\""},
			{"actions", g.Actions, strings.Join(Actions(), ", ")},
			{"streams", g.Streams, "stream names or prefixes such as \"fx.*\", or \"*\""},
		} {
			if len(l.v) == 0 {
				return keyErrorf(key+"."+l.name, "%s.%s is empty, so the grant gives nothing; list %s", key, l.name, l.want)
			}
		}
		for j, p := range g.Principals {
			if _, ok := users[p]; !ok && p != PrincipalAnonymous && p != PrincipalAnyUser && (!certNames || p == "") {
				return keyErrorf(fmt.Sprintf("%s.principals[%d]", key, j), "%s.principals[%d] %q is no user of auth.users; give a user name, \"*\" (any authenticated user) or \"anonymous\" (no credentials)", key, j, p)
			}
		}
		for j, act := range g.Actions {
			if !slices.Contains(Actions(), act) {
				return keyErrorf(fmt.Sprintf("%s.actions[%d]", key, j), "%s.actions[%d] %q is not an action; give %s", key, j, act, strings.Join(Actions(), ", "))
			}
		}
		for j, p := range g.Streams {
			if err := checkStreamPattern(p); err != nil {
				return keyErrorf(fmt.Sprintf("%s.streams[%d]", key, j), "%s.streams[%d] %v", key, j, err)
			}
		}
	}
	return nil
}

func principalMeaning(p string) string {
	if p == PrincipalAnonymous {
		return "a request without credentials"
	}
	return "any authenticated user"
}

// checkStreamPattern checks one grant's stream: a name, or a prefix and a
// final *.
func checkStreamPattern(p string) error {
	name, _ := strings.CutSuffix(p, "*")
	switch {
	case p == "":
		return errors.New("is empty; give a stream name, a prefix such as \"fx.*\", or \"*\" for every stream")
	case strings.Contains(name, "*"):
		return fmt.Errorf("%q has a * before its end; * may only end a prefix, as in \"fx.*\"", p)
	case strings.ContainsFunc(name, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/' }):
		return fmt.Errorf("%q holds a character no stream name has; give a stream name or a prefix such as \"fx.*\"", p)
	}
	return nil
}

// checkHash refuses what is not a bcrypt hash, without quoting it: a
// password pasted there by mistake must not reach the log.
func checkHash(h string) error {
	switch {
	case h == "":
		return errors.New("is empty; give the bcrypt hash `streamcast auth hash` prints")
	case h == Redacted:
		return errors.New("is \"[redacted]\", which is how streamcast config prints a hash; paste the hash itself, as `streamcast auth hash` prints it")
	}
	if _, err := bcrypt.Cost([]byte(h)); err != nil || !strings.HasPrefix(h, "$2") {
		return errors.New("is not a bcrypt hash (it begins $2a$, $2b$ or $2y$); make one with `streamcast auth hash` and paste it here, never the password itself")
	}
	return nil
}
