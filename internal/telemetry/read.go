package telemetry

import dto "github.com/prometheus/client_model/go"

// Read gathers the registry and returns the value of the series name
// whose labels include labels: a counter's or gauge's value, a
// histogram's count of observations; summed over the series that match,
// 0 when none does. It is for tests and debugging, not the scrape path.
func (m *Metrics) Read(name string, labels map[string]string) float64 {
	fams, err := m.reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if matches(s, labels) {
				sum += value(s)
			}
		}
	}
	return sum
}

func matches(s *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range s.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}
