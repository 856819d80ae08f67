package cmd

import (
	"errors"
	"net/url"
	"os"

	"github.com/streamcast/streamcast/pkg/wire"
)

// Environment variables the clients (tail, publish, bench) read
// credentials from when the stream URL carries none.
const (
	envUser     = "STREAMCAST_USER"
	envPassword = "STREAMCAST_PASSWORD"
)

// credentialsHelp is the shared paragraph of the clients' help.
const credentialsHelp = `A server with an auth: section asks for a user name and password (HTTP
Basic). Give them in the URL, percent-encoded (ws://USER:PASSWORD@host:8765/stream),
or in ` + "`STREAMCAST_USER`" + ` and ` + "`STREAMCAST_PASSWORD`" + `; the URL's win. A URL is never printed
with its credentials.`

// streamURL splits a stream URL argument into the URL without user info,
// which is all that is ever printed, and the credentials to send: the
// URL's user info, percent-decoded, else STREAMCAST_USER and
// STREAMCAST_PASSWORD; nil when there are none. A URL without ws:// or
// wss:// is a usage error that shows it corrected.
func streamURL(raw string) (string, *url.Userinfo, error) {
	if err := checkScheme(raw); err != nil {
		return "", nil, usageError{err}
	}
	clean, cred, err := wire.SplitCredentials(raw)
	if err != nil {
		return "", nil, usageError{err}
	}
	if cred != nil {
		return clean, cred, nil
	}
	cred, err = envCredentials()
	if err != nil {
		return "", nil, err
	}
	return clean, cred, nil
}

// envCredentials returns STREAMCAST_USER and STREAMCAST_PASSWORD as
// credentials; nil when neither is set.
func envCredentials() (*url.Userinfo, error) {
	user, pw := os.Getenv(envUser), os.Getenv(envPassword)
	switch {
	case user == "" && pw == "":
		return nil, nil
	case user == "":
		return nil, usageError{errors.New(envPassword + " is set but " + envUser + " is not; set both, or neither")}
	}
	return url.UserPassword(user, pw), nil
}
