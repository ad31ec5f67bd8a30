//! Columns read through a conversion: a type that the database holds as `Raw` (text, bytes,
//! NULL) and that is made from it with `TryFrom` decodes as a column itself, so a row struct
//! names it as a field's type and `FromRow` needs no `try_from` attribute. The conversion's error
//! is the column's decode error (sqlx names the column).

/// `$ty` decodes on every database as `$raw` does, then converts with `TryFrom<$raw>`.
macro_rules! decoded_via {
    ($raw:ty => $ty:ty $(, $g:ident: $bound:path)?) => {
        impl<DB: sqlx::Database $(, $g: $bound)?> sqlx::Type<DB> for $ty
        where
            $raw: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <$raw as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <$raw as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'r, DB: sqlx::Database $(, $g: $bound)?> sqlx::Decode<'r, DB> for $ty
        where
            $raw: sqlx::Decode<'r, DB>,
        {
            fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let raw = <$raw as sqlx::Decode<'r, DB>>::decode(value)?;
                Ok(<$ty>::try_from(raw)?)
            }
        }
    };
}
pub(super) use decoded_via;
