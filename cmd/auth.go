package cmd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/bcrypt"
)

// defaultHashCost is bcrypt's work factor for `auth hash`: about a quarter
// of a second per check on a current core. serve checks a password once
// per CacheTTL per user and password, not once per connection.
const defaultHashCost = 12

func newAuthCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Make what the config's auth: section needs",
		Long: `Commands for the config's auth: section, which makes serve ask every client for
a user name and password (HTTP Basic) and hold a grant for what it asks.`,
	}
	cmd.AddCommand(newAuthHashCmd(a))
	return cmd
}

func newAuthHashCmd(a *app) *cobra.Command {
	var cost int
	cmd := &cobra.Command{
		Use:   "hash",
		Short: "Print the bcrypt hash of a password, for auth.users[].password_hash",
		Long: `Read a password and print its bcrypt hash on stdout, for a user's password_hash
in the config's auth: section. On a terminal it asks for the password twice
without echoing it; otherwise it reads the first line of stdin (without its
line ending). The password is never an argument, so it stays out of the
shell's history and the process list.

bcrypt reads at most 72 bytes of a password; a longer one is refused.`,
		Example: `  streamcast auth hash
  printf '%s\n' "$PASSWORD" | streamcast auth hash --cost 12`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cost < bcrypt.MinCost || cost > bcrypt.MaxCost {
				return usageError{fmt.Errorf("--cost is %d; give %d to %d (each step doubles the time a check takes)", cost, bcrypt.MinCost, bcrypt.MaxCost)}
			}
			pw, err := a.readPassword()
			if err != nil {
				return err
			}
			if len(pw) > 72 {
				return fmt.Errorf("the password is %d bytes; bcrypt reads at most 72, so give a shorter one", len(pw))
			}
			h, err := bcrypt.GenerateFromPassword(pw, cost)
			if err != nil {
				return fmt.Errorf("hash the password: %w", err)
			}
			_, err = fmt.Fprintf(a.stdout, "%s\n", h)
			return err
		},
	}
	cmd.Flags().IntVar(&cost, "cost", defaultHashCost, "bcrypt work factor (`N`, 4 to 31; each step doubles the time)")
	return cmd
}

// readPassword asks a terminal for the password twice, without echo, or
// reads the first line of a stdin that is not one. An empty password is
// refused.
func (a *app) readPassword() ([]byte, error) {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(f.Fd()) {
		fmt.Fprint(a.stderr, "Password: ")
		pw, err := term.ReadPassword(f.Fd())
		fmt.Fprintln(a.stderr)
		if err != nil {
			return nil, fmt.Errorf("read the password from the terminal: %w", err)
		}
		fmt.Fprint(a.stderr, "Again: ")
		again, err := term.ReadPassword(f.Fd())
		fmt.Fprintln(a.stderr)
		if err != nil {
			return nil, fmt.Errorf("read the password from the terminal: %w", err)
		}
		if !bytes.Equal(pw, again) {
			return nil, errors.New("the two passwords differ; run it again")
		}
		if len(pw) == 0 {
			return nil, errors.New("the password is empty; type one")
		}
		return pw, nil
	}
	line, err := bufio.NewReader(a.stdin).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read the password from stdin: %w", err)
	}
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	if len(line) == 0 {
		return nil, errors.New("stdin held no password; pipe one line holding it, as in printf '%s\\n' \"$PASSWORD\" | streamcast auth hash")
	}
	return line, nil
}
