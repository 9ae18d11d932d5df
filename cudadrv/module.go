package cudadrv

import "sync/atomic"

// Module is loaded device code (PTX or cubin). Functions taken from it are valid until Unload.
type Module struct {
	ctx      *Context
	raw      RawModule
	unloaded atomic.Bool
}

// Function is one kernel entry point of a module.
type Function struct {
	mod  *Module
	raw  RawFunction
	name string
}

// LoadModule loads PTX text or a cubin image into the context (cuModuleLoadData). PTX is
// compiled for the device by the driver at load time.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, &Error{Op: "cuModuleLoadData", Result: ErrorInvalidImage, Detail: "empty image"}
	}
	raw, err := c.b.ModuleLoadData(image)
	if err != nil {
		return nil, c.note(err)
	}
	c.count.modulesLoaded.Add(1)
	return &Module{ctx: c, raw: raw}, nil
}

func (m *Module) live() error {
	if m.unloaded.Load() {
		return ErrDestroyed
	}
	return nil
}

// Function looks up the kernel named name (its extern "C" name).
func (m *Module) Function(name string) (*Function, error) {
	if err := m.live(); err != nil {
		return nil, err
	}
	raw, err := m.ctx.b.ModuleGetFunction(m.raw, name)
	if err != nil {
		return nil, m.ctx.note(err)
	}
	return &Function{mod: m, raw: raw, name: name}, nil
}

// Unload unloads the module; its functions become invalid. A second call returns
// ErrDestroyed.
func (m *Module) Unload() error {
	if !m.unloaded.CompareAndSwap(false, true) {
		return ErrDestroyed
	}
	if err := m.ctx.b.ModuleUnload(m.raw); err != nil {
		return m.ctx.note(err)
	}
	m.ctx.count.modulesUnloaded.Add(1)
	return nil
}

// Name is the kernel's name.
func (f *Function) Name() string { return f.name }

// Raw returns the driver's function handle.
func (f *Function) Raw() RawFunction { return f.raw }
