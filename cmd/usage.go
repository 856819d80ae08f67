package cmd

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// usageError marks an error as the user's mistake in calling streamcast
// (exit code 2) rather than a failure of the work.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// printUsageError writes a usage error as one line that names the command
// and points at its help: the whole usage would bury the one mistake.
func printUsageError(w io.Writer, c *cobra.Command, err error) {
	path := c.CommandPath()
	fmt.Fprintf(w, "%s: %v; see '%s --help'\n", path, err, path)
}

// flagRuleError reports whether err is cobra's refusal of a flag rule (a
// required flag left out, flags of a group given apart), which cobra
// returns as a plain error after the configuration is read, beyond the
// reach of the flag error function.
func flagRuleError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "required flag(s) ") || strings.HasPrefix(msg, "if any flags in the group ") ||
		strings.HasPrefix(msg, "at least one of the flags in the group ")
}

// pflag's words for the flag mistakes a suggestion can help with.
var (
	unknownLong  = regexp.MustCompile(`^unknown flag: --([^ =]+)$`)
	unknownShort = regexp.MustCompile(`^unknown shorthand flag: '.' in -([^ =]+)$`)
)

// flagError rewords pflag's error for an unknown flag, suggesting the
// flag of cmd nearest to what was typed ("--ofset" → --offset, "-offset"
// → --offset); any other flag error (a bad value, a missing one) keeps
// its words. Cobra suggests for commands only.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if m := unknownLong.FindStringSubmatch(msg); m != nil {
		msg = "unknown flag --" + m[1]
		if s := suggestFlag(cmd, m[1]); s != "" {
			msg += " (did you mean --" + s + "?)"
		}
		return usageError{fmt.Errorf("%s", msg)}
	}
	if m := unknownShort.FindStringSubmatch(msg); m != nil {
		if s := suggestFlag(cmd, m[1]); s != "" {
			return usageError{fmt.Errorf("unknown flag -%s (did you mean --%s? long flags take two dashes)", m[1], s)}
		}
	}
	return usageError{err}
}

// suggestFlag is the name of cmd's flag (its own or inherited, not
// hidden) nearest to typed: the one a single slip away, by edit distance
// (a swap of two neighbours counts as one), or else the only one it
// begins. "" when none is near enough to be a good guess.
func suggestFlag(cmd *cobra.Command, typed string) string {
	var names []string
	seen := map[string]bool{}
	add := func(f *pflag.Flag) {
		if !f.Hidden && !seen[f.Name] {
			seen[f.Name] = true
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	sort.Strings(names)
	return nearest(typed, names)
}

// nearest picks from names the one nearest to typed: the closest within
// an edit distance of 1, or 2 for a name of 6 or more letters; else the
// only name that begins with typed (of at least 3 letters).
func nearest(typed string, names []string) string {
	limit := 1
	if len(typed) >= 6 {
		limit = 2
	}
	best, bestD := "", limit+1
	for _, n := range names {
		if d := editDistance(strings.ToLower(typed), n); d < bestD {
			best, bestD = n, d
		}
	}
	if best != "" {
		return best
	}
	var prefixed []string
	for _, n := range names {
		if len(typed) >= 3 && strings.HasPrefix(n, typed) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// editDistance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of two neighbours, one
// each.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
