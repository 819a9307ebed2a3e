//! The C parameter list of each kernel of a module or library as its image declares them
//! ([`ParamTable`]), what the parameter-count registry ([`counts`](super::counts)) keeps.
//! The module layer reads the tables from PTX text, cubins and fatbins (`module::image`).

use std::collections::BTreeMap;

/// One kernel's C parameters as its image declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParamList {
    /// How many C parameters the kernel takes.
    pub(crate) count: usize,
    /// The offset and size in bytes of each, in order, where the image says them (a
    /// cubin) or they follow from the declared types (PTX of types known here).
    pub(crate) layout: Option<Vec<(usize, usize)>>,
}

impl ParamList {
    /// Where the last parameter ends (0 for none), where the layout is known.
    pub(crate) fn bytes(&self) -> Option<usize> {
        let layout = self.layout.as_ref()?;
        Some(layout.last().map_or(0, |&(offset, size)| offset + size))
    }
}

/// The parameter lists of every kernel an image declares, by name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ParamTable {
    /// `None` where two entries of the image declare the kernel differently.
    kernels: BTreeMap<Box<[u8]>, Option<ParamList>>,
    /// The image holds PTX with preprocessor directives (`#define`, `#if`, `#include`):
    /// ptxas expands them before it reads a signature, this reader does not, so the text
    /// may declare other kernels and parameters than it reads as here (a list hidden
    /// behind `#if 0`, a parameter or a whole `.entry` made by a macro). No kernel of the
    /// image then has a list.
    opaque: bool,
}

impl ParamTable {
    /// The parameter list of kernel `name`, where the image declares it (consistently).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&ParamList> {
        if self.opaque {
            return None;
        }
        self.kernels.get(name)?.as_ref()
    }

    /// Whether no kernel has a parameter list here.
    pub(crate) fn is_empty(&self) -> bool {
        self.opaque || self.kernels.values().all(Option::is_none)
    }

    /// Marks the whole table as read from text with preprocessor directives: no kernel of
    /// it has a list (see the `opaque` field).
    pub(crate) fn make_opaque(&mut self) {
        self.opaque = true;
    }

    /// Every kernel with its parameter list, by name.
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &ParamList)> {
        self.kernels
            .iter()
            .filter(|_| !self.opaque)
            .filter_map(|(name, list)| Some((&**name, list.as_ref()?)))
    }

    pub(crate) fn add(&mut self, name: &[u8], list: ParamList) {
        match self.kernels.get_mut(name) {
            None => {
                self.kernels.insert(name.into(), Some(list));
            }
            Some(slot) => *slot = slot.take().and_then(|old| agree(old, list)),
        }
    }

    /// Marks `name` as declared in a way not understood here: no list for it, even where
    /// another entry of the image has one (the driver may load either).
    pub(crate) fn unknown(&mut self, name: &[u8]) {
        self.kernels.insert(name.into(), None);
    }
}

/// One list for a kernel that two entries declare, or `None` if they differ.
fn agree(a: ParamList, b: ParamList) -> Option<ParamList> {
    if a.count != b.count {
        return None;
    }
    match (a.layout, b.layout) {
        (Some(x), Some(y)) if x != y => None,
        (Some(x), _) | (None, Some(x)) => Some(ParamList {
            count: a.count,
            layout: Some(x),
        }),
        (None, None) => Some(ParamList {
            count: a.count,
            layout: None,
        }),
    }
}
