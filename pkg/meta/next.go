package meta

// NextLogName returns the name of the log a migration of m's stream
// creates: LogName with the number after the highest its logs have, so a
// gap in the numbering (an upgraded home that lacked a log) never makes
// it reuse a name.
func (m *Metadata) NextLogName() string {
	n := len(m.Logs)
	for _, lg := range m.Logs {
		if k := logNumber(m.Stream, lg.Name); k > n {
			n = k
		}
	}
	return LogName(m.Stream, n+1)
}
