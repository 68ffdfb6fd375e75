// Package promexample shows otelkvbreaker exporting to Prometheus through
// OpenTelemetry's Prometheus exporter, in a test that scrapes it. It is a
// module of its own so that a program using otelkvbreaker does not inherit
// the exporter and the Prometheus client in its module graph.
package promexample
