// Package storetest is a Store for tests that stops changing its folder
// after a given number of changes, as a process killed there would: the
// changes made before stand, every later one fails and leaves nothing.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/backfill-dev/backfill/internal/store"
)

// ErrKilled is the error of every change past the budget.
var ErrKilled = errors.New("killed")

// Dying wraps a Store; it counts the changes made through it and its
// Subs (a file committed, a file or a folder removed) and, once Budget
// changes are made (Budget < 0: never), fails every later change and
// every file it is asked to create.
type Dying struct {
	store.Store
	c *counter
}

type counter struct {
	mu      sync.Mutex
	budget  int
	changes []string
}

// NewDying wraps st; it dies after budget changes (never when budget < 0).
func NewDying(st store.Store, budget int) *Dying {
	return &Dying{Store: st, c: &counter{budget: budget}}
}

// Changes returns what was changed, in order: "commit NAME", "remove
// NAME" or "remove-all NAME", NAME as Where shows it.
func (d *Dying) Changes() []string {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return append([]string(nil), d.c.changes...)
}

// Died tells whether a change was refused.
func (d *Dying) Died() bool {
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	return d.c.budget >= 0 && len(d.c.changes) >= d.c.budget
}

func (c *counter) alive() bool { return c.budget < 0 || len(c.changes) < c.budget }

// change makes one change through do, unless the budget is spent.
func (c *counter) change(what string, do func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.alive() {
		return fmt.Errorf("%s: %w", what, ErrKilled)
	}
	if err := do(); err != nil {
		return err
	}
	c.changes = append(c.changes, what)
	return nil
}

func (d *Dying) Create(ctx context.Context, name string) (store.Writer, error) {
	d.c.mu.Lock()
	alive := d.c.alive()
	d.c.mu.Unlock()
	if !alive {
		return nil, fmt.Errorf("create %s: %w", d.Where(name), ErrKilled)
	}
	w, err := d.Store.Create(ctx, name)
	if err != nil {
		return nil, err
	}
	return &writer{Writer: w, d: d, name: name}, nil
}

type writer struct {
	store.Writer
	d    *Dying
	name string
}

func (w *writer) Commit() error {
	err := w.d.c.change("commit "+w.d.Where(w.name), w.Writer.Commit)
	if errors.Is(err, ErrKilled) {
		_ = w.Writer.Abort() // what a killed process leaves in the temporary folder is not the point
	}
	return err
}

func (d *Dying) Remove(ctx context.Context, name string) error {
	return d.c.change("remove "+d.Where(name), func() error { return d.Store.Remove(ctx, name) })
}

func (d *Dying) RemoveAll(ctx context.Context, name string) error {
	return d.c.change("remove-all "+d.Where(name), func() error { return d.Store.RemoveAll(ctx, name) })
}

func (d *Dying) Sub(name string) store.Store { return &Dying{Store: d.Store.Sub(name), c: d.c} }

func (d *Dying) Parent() (store.Store, string) {
	p, name := d.Store.Parent()
	return &Dying{Store: p, c: d.c}, name
}
