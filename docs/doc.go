// Package docs holds Plumbline's user documentation (the pages beside this
// file) and the test that keeps it honest: every flag, metric, alert, API
// path and command line of the programs appears in the pages as they are.
package docs
