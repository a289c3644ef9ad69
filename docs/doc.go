// Package docs holds Plumbline's user documentation (the pages beside this
// file) and the test that keeps it honest: every flag, metric, alert, API
// path and command line of the programs appears in the pages as they are,
// every link resolves, and the user pages name no test and no issue (the
// maintainers' pages under dev/ may).
package docs
