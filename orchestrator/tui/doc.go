// Package tui is shiro's interactive front end, built on Bubble Tea: one
// root model (Model) whose components are plain structs with a View; huh
// forms (approval, onboarding, pickers) are child models. Update does no IO:
// side effects are tea.Cmds run by a runtime that owns every goroutine it
// starts. Agent events, approval requests and sandbox progress reach the
// program through one pump goroutine that calls program.Send, in order.
//
// Finished transcript lines are printed above the program into the
// terminal's scrollback, once (Bubble Tea's Println, like Ink's <Static>),
// so the cost of a frame does not grow with the conversation.
//
// It is the only package that imports the charm libraries.
package tui
