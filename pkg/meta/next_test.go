package meta

import "testing"

// TestNextLogNameSkipsPastTheHighestNumber: the next log is numbered
// after the highest log the stream has, so a gap (an upgraded home that
// lacked a log) never makes a migration reuse a name.
func TestNextLogNameSkipsPastTheHighestNumber(t *testing.T) {
	for _, tc := range []struct {
		logs []string
		want string
	}{
		{[]string{"t"}, "t-v2"},
		{[]string{"t", "t-v2"}, "t-v3"},
		{[]string{"t", "t-v3"}, "t-v4"},
		{[]string{"t-v5"}, "t-v6"},
	} {
		m := &Metadata{Stream: "t"}
		for _, name := range tc.logs {
			m.Logs = append(m.Logs, Log{Name: name})
		}
		if got := m.NextLogName(); got != tc.want {
			t.Errorf("NextLogName after %q = %q, want %q", tc.logs, got, tc.want)
		}
	}
}
