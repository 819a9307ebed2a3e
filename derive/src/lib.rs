//! `#[derive(DeviceCopy)]` for [cuda-brand](https://docs.rs/cuda-brand): use it through
//! `cuda_brand::DeviceCopy` (the crate's default feature `derive` re-exports it), not from
//! this crate directly.
//!
//! The derive writes `unsafe impl DeviceCopy` only for a type it has checked, at compile
//! time, against the trait's contract:
//!
//! * a `struct` (not an `enum` or a `union`) without generic parameters;
//! * `#[repr(C)]` or `#[repr(transparent)]`, so the layout is C's and the checks below
//!   know it;
//! * no field of a type that is never plain data (`bool`, `char`, `NonZero*`, references,
//!   raw pointers): a message naming the field, before anything else;
//! * every field's type implements `DeviceCopy` (an error on the field's type);
//! * no padding: every field starts where the one before it ends, and the last one ends
//!   where the struct does (`offset_of!` and `size_of` in constants, an error on the field
//!   after the gap, or on the last field for padding at the end); and none inside a field:
//!   its type is a number, an array of such, one of the crate's library types, or a
//!   derived struct (the trait's hidden `__PADDING_FREE` constant says so). A type whose
//!   `DeviceCopy` is written by hand promises no padding too, but no compiler checked the
//!   promise, so it leaves the constant false and the derive refuses it as a field. Tuples
//!   are not `DeviceCopy` at all (an error on the field's type, as for any such type).
//!
//! Every check is made where the struct is defined, for its one concrete layout: nothing
//! waits for a use of the type (generic structs are refused for that reason).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{ToTokens, quote, quote_spanned};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Error, Ident, Member, Meta, Token, Type};

/// Implements `cuda_brand::DeviceCopy` for a `#[repr(C)]` struct of plain data without
/// padding, checking all of that at compile time. See `cuda_brand::DeviceCopy`.
#[proc_macro_derive(DeviceCopy)]
pub fn derive_device_copy(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    expand(&input).into()
}

/// Everything the derive emits: the impl and its checks, or the errors (with the bare impl,
/// so that the type's uses add no second error about the same mistake).
fn expand(input: &DeriveInput) -> TokenStream2 {
    let name = &input.ident;
    let mut errors: Vec<Error> = Vec::new();

    let fields = match &input.data {
        Data::Struct(data) => Some(&data.fields),
        Data::Enum(data) => {
            let enum_token = &data.enum_token;
            errors.push(Error::new_spanned(
                quote!(#enum_token #name),
                format!(
                    "`#[derive(DeviceCopy)]` cannot be used on an enum: the GPU may write any \
                     bytes, and a discriminant that names no variant of `{name}` is undefined \
                     behaviour; store the variant as a `u32` field of a struct and turn it back \
                     into `{name}` with a `match`"
                ),
            ));
            None
        }
        Data::Union(data) => {
            let union_token = &data.union_token;
            errors.push(Error::new_spanned(
                quote!(#union_token #name),
                format!(
                    "`#[derive(DeviceCopy)]` cannot be used on a union: which bytes of `{name}` \
                     are initialized depends on the field last written, which a derive cannot \
                     check; use a struct, or write `unsafe impl DeviceCopy for {name} {{}}` \
                     yourself after checking the trait's rules"
                ),
            ));
            None
        }
    };

    if !input.generics.params.is_empty() {
        errors.push(Error::new_spanned(
            &input.generics,
            format!(
                "`#[derive(DeviceCopy)]` cannot be used on a generic struct: whether `{name}` \
                 has padding depends on its parameters, which a derive cannot check for every \
                 choice of them (and `DeviceCopy` types borrow nothing, so need no lifetime); \
                 derive it on a struct with concrete field types, one per element type you need"
            ),
        ));
        // The impl anyway (it cannot compile without the error above), so that the type's
        // uses add no second error about the same mistake.
        let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
        let predicates = where_clause.map(|w| &w.predicates);
        let errors = to_compile_errors(errors);
        return quote! {
            #errors
            #[automatically_derived]
            #[allow(unsafe_code)]
            unsafe impl #impl_generics ::cuda_brand::DeviceCopy for #name #ty_generics
            where
                #name #ty_generics: ::core::marker::Copy + 'static,
                #predicates
            {}
        };
    }

    if fields.is_some() {
        if let Err(e) = check_repr(input) {
            errors.push(e);
        }
    }
    if let Some(fields) = fields {
        for field in fields.iter() {
            refuse_never_plain(&field.ty, &mut errors);
        }
    }

    // The impl carries the struct name's span, so that a missing `Copy` (a supertrait of
    // `DeviceCopy`) is reported on the struct.
    let imp = quote_spanned! {name.span()=>
        // SAFETY: the checks below (a compile error when one fails): `#[repr(C)]` or
        // `#[repr(transparent)]`, every field `DeviceCopy` (so every bit pattern of each is a
        // value and it owns nothing), and no padding (so every byte belongs to a field).
        #[automatically_derived]
        #[allow(unsafe_code)]
        unsafe impl ::cuda_brand::DeviceCopy for #name {
            const __PADDING_FREE: bool = true;
        }
    };
    let (Some(fields), true) = (fields, errors.is_empty()) else {
        let errors = to_compile_errors(errors);
        return quote!(#errors #imp);
    };

    // Every field's type is `DeviceCopy` (an error on the field's type if not), and free of
    // padding itself. The type is named with the spans of its own first and last tokens, so
    // that the errors cover it.
    let field_checks = fields.iter().enumerate().map(|(i, field)| {
        let ty = &field.ty;
        let (first, last) = first_and_last_span(ty);
        let open = quote_spanned!(first=> <);
        let close = quote_spanned!(last=> >);
        let as_device_copy = quote_spanned!(last=> as ::cuda_brand::DeviceCopy);
        let field_name = match &field.ident {
            Some(ident) => format!("field `{ident}`"),
            None => format!("field `{i}`"),
        };
        let message = format!(
            "{field_name} of `{name}` may have padding inside it: its type implements \
             `DeviceCopy` by hand, whose promise of no padding no compiler has checked, and \
             padding bytes would carry host memory to the GPU; derive `DeviceCopy` on the \
             field's type instead, with its padding (if any) as a field of its own"
        );
        quote_spanned! {first=>
            const _: () = ::core::assert!(
                #open #ty #as_device_copy #close::__PADDING_FREE,
                #message
            );
        }
    });

    // No padding: each field starts where the previous one ends, and the struct ends where
    // its last field does.
    let members: Vec<(Member, &Type, Span)> = fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let member = match &field.ident {
                Some(ident) => Member::Named(ident.clone()),
                None => Member::Unnamed(syn::Index {
                    index: i as u32,
                    span: field.ty.span(),
                }),
            };
            let span = field.ident.as_ref().map_or(field.ty.span(), Ident::span);
            (member, &field.ty, span)
        })
        .collect();
    let mut layout_checks = Vec::new();
    for pair in members.windows(2) {
        let (prev, prev_ty, _) = &pair[0];
        let (this, _, span) = &pair[1];
        let message = format!(
            "`{name}` has padding before field `{this}`: it starts at a multiple of its \
             alignment, leaving a gap after field `{prev}`, and those bytes would carry host \
             memory to the GPU; reorder the fields from the largest alignment to the smallest, \
             or fill the gap with a `[u8; N]` field",
            this = member_name(this),
            prev = member_name(prev),
        );
        layout_checks.push(quote_spanned! {*span=>
            const _: () = ::core::assert!(
                ::core::mem::offset_of!(#name, #this)
                    == ::core::mem::offset_of!(#name, #prev) + ::core::mem::size_of::<#prev_ty>(),
                #message
            );
        });
    }
    match members.last() {
        Some((last, last_ty, span)) => {
            let message = format!(
                "`{name}` has padding after its last field `{last}`: its size is rounded up to \
                 a multiple of its alignment, and those bytes would carry host memory to the \
                 GPU; end the struct with a `[u8; N]` field that fills them, or reorder the \
                 fields",
                last = member_name(last),
            );
            layout_checks.push(quote_spanned! {*span=>
                const _: () = ::core::assert!(
                    ::core::mem::size_of::<#name>()
                        == ::core::mem::offset_of!(#name, #last) + ::core::mem::size_of::<#last_ty>(),
                    #message
                );
            });
        }
        None => {
            let message = format!(
                "`{name}` has no fields but a size: every one of its bytes is padding, and would \
                 carry host memory to the GPU"
            );
            layout_checks.push(quote_spanned! {name.span()=>
                const _: () = ::core::assert!(::core::mem::size_of::<#name>() == 0, #message);
            });
        }
    }

    quote! {
        #imp
        #(#field_checks)*
        #(#layout_checks)*
    }
}

/// `#[repr(C)]` or `#[repr(transparent)]`, among any others (`align`, `packed`: the
/// padding check covers what they change).
fn check_repr(input: &DeriveInput) -> Result<(), Error> {
    let name = &input.ident;
    let mut other_repr = None;
    for attr in &input.attrs {
        if !attr.path().is_ident("repr") {
            continue;
        }
        let items = attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)?;
        for item in &items {
            if item.path().is_ident("C") || item.path().is_ident("transparent") {
                return Ok(());
            }
        }
        other_repr.get_or_insert(attr);
    }
    let message = format!(
        "`#[derive(DeviceCopy)]` needs `#[repr(C)]` on `{name}`: without it Rust chooses the \
         order of the fields and the padding between them, so a kernel's C struct would read \
         them at other offsets, and the derive could not check for padding; add `#[repr(C)]` \
         above the struct (or `#[repr(transparent)]` for a wrapper of one field)"
    );
    Err(match other_repr {
        Some(attr) => Error::new_spanned(attr, message),
        None => Error::new(name.span(), message),
    })
}

/// Errors for field types that are never plain data, looking inside arrays, tuples and
/// parentheses (other types are left to the `DeviceCopy` bound, whose message covers them).
fn refuse_never_plain(ty: &Type, errors: &mut Vec<Error>) {
    let message = match ty {
        Type::Array(array) => return refuse_never_plain(&array.elem, errors),
        Type::Paren(paren) => return refuse_never_plain(&paren.elem, errors),
        Type::Group(group) => return refuse_never_plain(&group.elem, errors),
        Type::Tuple(tuple) => {
            for elem in &tuple.elems {
                refuse_never_plain(elem, errors);
            }
            return;
        }
        Type::Reference(_) => "a reference cannot live in GPU memory: it is a host address, \
            which a kernel cannot follow, and the GPU may write bytes that are no valid \
            reference; store an index into another buffer (a `u32`) instead"
            .to_owned(),
        Type::Ptr(_) => "a raw pointer cannot live in GPU memory: it holds a host address, \
            which a kernel cannot follow; store an index into another buffer (a `u32`) instead"
            .to_owned(),
        Type::Path(path) if path.qself.is_none() => {
            let Some(last) = path.path.segments.last() else {
                return;
            };
            let ident = last.ident.to_string();
            match ident.as_str() {
                "bool" => "`bool` cannot live in GPU memory: the GPU may write any byte, and \
                    a `bool` that is neither 0 nor 1 is undefined behaviour; store a `u8` \
                    (1 for true, 0 for false) and compare it with 0"
                    .to_owned(),
                "char" => "`char` cannot live in GPU memory: the GPU may write any 4 bytes, \
                    and a `char` that is no Unicode scalar value is undefined behaviour; store \
                    a `u32` and convert it with `char::from_u32`"
                    .to_owned(),
                _ if ident.starts_with("NonZero") => format!(
                    "`{ident}` cannot live in GPU memory: the GPU may write 0, which is no valid \
                     `{ident}`; store the plain integer and convert it with `{ident}::new`"
                ),
                _ => return,
            }
        }
        _ => return,
    };
    errors.push(Error::new_spanned(ty, message));
}

/// The spans of the first and last tokens of `ty` (on stable, a span cannot be joined).
fn first_and_last_span(ty: &Type) -> (Span, Span) {
    let mut tokens = ty.to_token_stream().into_iter();
    let first = tokens.next().map_or_else(Span::call_site, |t| t.span());
    let last = tokens.last().map_or(first, |t| t.span());
    (first, last)
}

fn member_name(member: &Member) -> String {
    match member {
        Member::Named(ident) => ident.to_string(),
        Member::Unnamed(index) => index.index.to_string(),
    }
}

fn to_compile_errors(errors: Vec<Error>) -> TokenStream2 {
    errors.iter().map(Error::to_compile_error).collect()
}
