// Package lint holds repository-wide checks that run as tests: a test or
// a Makefile target that reaches outside the repository and its temporary
// folders, or a document that links to a file the repository does not
// have, fails `make test` on every machine, not only on the one that
// lacks the path.
package lint
