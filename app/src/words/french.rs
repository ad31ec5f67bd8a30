//! The widget in French, loaded as a chunk when the element's `lang` (else the page's) is `fr`.

use std::sync::Arc;

use strum::EnumCount;

use super::table::Word;

/// Each key's French (a test checks every key is here once, with English's slots).
static FRENCH: &[(Word, &str)] = &[
    (Word::Send, "Envoyer"),
    (Word::Stop, "Arrêter"),
    (Word::WriteAMessage, "Écrivez un message…"),
    (Word::Message, "Message"),
    (
        Word::WaitForUploads,
        "Attendez la fin de l’envoi des fichiers.",
    ),
    (Word::FilesAttached, "Fichiers joints à ce message"),
    (Word::AttachFiles, "Joindre des fichiers"),
    (
        Word::AttachFilesHint,
        "Joindre des images ou des fichiers texte (ou les déposer ou les coller ici)",
    ),
    (Word::RemoveFile, "Retirer {name}"),
    (Word::FileUploading, "{size} · envoi…"),
    (
        Word::UploadNotStarted,
        "{name} : l’envoi n’a pas pu commencer (cette partie de la discussion ne s’est pas chargée) ; joignez-le à nouveau",
    ),
    (
        Word::TooManyFiles,
        "{name} : un message porte au plus {max} fichiers",
    ),
    (
        Word::AttachNotConnected,
        "{name} : pas encore connecté ; joignez-le à nouveau dans un instant",
    ),
    (Word::ContextDialogTitle, "Ce que le modèle a reçu"),
    (Word::Close, "Fermer"),
    (
        Word::ReceiptReplyGone,
        "Cette réponse n’est plus dans la conversation.",
    ),
    (
        Word::ReceiptNothingRecorded,
        "Rien n’a été enregistré pour cette réponse.",
    ),
    (
        Word::ReceiptUnreadable,
        "Le reçu n’a pas pu être lu : {why}",
    ),
    (
        Word::ReceiptStoredBefore,
        "Cette réponse a été enregistrée avant que Glassbox ne garde des reçus : seuls les totaux sont connus.",
    ),
    (Word::ReceiptSentInOrder, "Envoyé au modèle, dans l’ordre"),
    (Word::ReceiptLeftOut, "Laissé de côté"),
    (
        Word::ReceiptNoHistoryLeftOut,
        "Aucun historique n’a été laissé de côté.",
    ),
    (Word::ReceiptNothingLeftOut, "Rien n’a été laissé de côté."),
    (Word::Tokens, "{count} jetons"),
    (Word::ReceiptRulesAndReferences, "Règles et références"),
    (Word::ReceiptRules, "Règles"),
    (Word::ReceiptReferences, "Références"),
    (Word::ReceiptTools, "Outils"),
    (Word::ReceiptNearMisses, "Presque retenus"),
    (Word::ReceiptNone, "Aucun"),
    (Word::ReceiptShowValues, "Afficher les valeurs"),
    (Word::ReceiptHideValues, "Masquer les valeurs"),
    (
        Word::ReceiptValuesUnknown,
        "Les valeurs ne sont pas connues ici.",
    ),
    (
        Word::ReceiptShowInConversation,
        "Afficher dans la conversation",
    ),
    (Word::ReceiptMessages, "Messages"),
    (
        Word::ReceiptMessagesGone,
        "Ces messages ne sont plus dans la conversation.",
    ),
    (Word::ReceiptWhoYou, "Vous : "),
    (Word::ReceiptWhoAssistant, "Assistant : "),
    (Word::ReceiptWhoApproval, "Approbation : "),
    (Word::ReceiptParts, "Parties"),
    (Word::ReceiptOurCount, "Notre décompte de l’entrée"),
    (Word::ReceiptOursExact, "{count} jetons ({encoding})"),
    (
        Word::ReceiptOursEstimate,
        "~{count} jetons ({encoding}, une estimation)",
    ),
    (Word::ReceiptReportedBy, "Communiqué par le fournisseur"),
    (
        Word::ReceiptReportedDrift,
        "{input} en entrée · {output} en sortie (notre décompte {drift} %)",
    ),
    (
        Word::ReceiptReported,
        "{input} en entrée · {output} en sortie",
    ),
    (Word::ReceiptNotReported, "non communiqué"),
    (Word::ReceiptWindow, "Fenêtre"),
    (
        Word::ReceiptWindowTokens,
        "{limit} jetons, dont {reserve} réservés à la réponse",
    ),
    (
        Word::PageContextChanged,
        "Contexte de la page modifié : {keys}",
    ),
    (Word::SessionContext, "Contexte de la session : {items}"),
    (Word::PanelLoading, "Chargement du panneau {panel}…"),
    (
        Word::PanelLoadFailed,
        "Le panneau {panel} n’a pas pu être chargé ; vérifiez la connexion.",
    ),
    (Word::PanelSettings, "réglages"),
    (Word::PanelTopics, "sujets"),
    (Word::PanelSession, "session"),
    (Word::PanelWelcome, "accueil"),
    (Word::PanelApproval, "approbation"),
    (Word::PanelContext, "contexte"),
    (Word::PanelPreview, "aperçu"),
    (Word::PanelMark, "marquage"),
    (Word::Retry, "Réessayer"),
    (Word::Connected, "Connecté"),
    (Word::Connecting, "Connexion…"),
    (
        Word::OfflineRetrying,
        "Hors ligne — nouvel essai dans {secs} s",
    ),
    (Word::Disconnected, "Déconnecté"),
    (Word::ReconnectNow, "Se reconnecter"),
    (Word::Suggestions, "Suggestions"),
    (Word::ReplyStopped, "Arrêtée"),
    (Word::ReplyInProgress, "Réponse en cours"),
    (
        Word::UsageCountedExact,
        "{tokens} jetons en entrée selon notre décompte ({encoding})",
    ),
    (
        Word::UsageCountedApprox,
        "~{tokens} jetons en entrée selon notre décompte ({encoding})",
    ),
    (
        Word::UsageSpentByOurCount,
        "~{input} en entrée · ~{output} en sortie consommés, selon notre décompte faute de chiffres du fournisseur (arrêtée)",
    ),
    (
        Word::UsageReported,
        "{input} en entrée · {output} en sortie selon le fournisseur",
    ),
    (
        Word::UsageCompressed,
        "↓ compressé ({strategy}) : {original} → {compressed} jetons, {dropped} messages écartés",
    ),
    (
        Word::UsageHint,
        "Notre décompte de la requête à côté de celui du fournisseur, pour voir les écarts",
    ),
    (Word::ViewContext, "Voir le contexte"),
    (Word::ToolsUsed, "Outils utilisés pour cette réponse"),
    (Word::MarkPinnedBadge, "📌 épinglé : toujours envoyé"),
    (Word::MarkExcludedBadge, "⊘ exclu : jamais envoyé"),
    (Word::MessageOptions, "Options du message"),
    (Word::MessageOptionsHint, "Épingler ou exclure ce message"),
    (Word::MarkOptionsLabel, "Ce qui parvient au modèle"),
    (Word::MarkPin, "Épingler : toujours envoyer"),
    (Word::MarkExclude, "Exclure : ne jamais envoyer"),
    (Word::MarkClear, "Effacer"),
    (
        Word::RateLimitedKept,
        "Trop de messages pour l’instant : celui-ci est conservé et partira dans {secs} s.",
    ),
    (
        Word::BusyKept,
        "Le serveur est occupé ou redémarre : ce message est conservé et partira dans {secs} s.",
    ),
    (Word::Dismiss, "Ignorer"),
    (Word::MessageSending, "Envoi…"),
    (Word::ChatTitle, "Glassbox"),
    (Word::NewChat, "Nouvelle conversation"),
    (
        Word::NewChatKept,
        "Nouvelle conversation (celle-ci reste dans votre liste)",
    ),
    (
        Word::NewChatDeleted,
        "Nouvelle conversation (celle-ci est supprimée)",
    ),
    (Word::Topics, "Sujets"),
    (
        Word::TopicsHint,
        "Sujets : choisir quel historique parvient au modèle",
    ),
    (Word::DrawerToggle, "Règles, références et réglages"),
    (
        Word::DrawerToggleHint,
        "Règles, références et réglages de cette conversation",
    ),
    (Word::ContextSettings, "Réglages du contexte"),
    (Word::Conversation, "Conversation"),
    (
        Word::EmptyChat,
        "Demandez ce que vous voulez. Les réponses s’affichent ici au fur et à mesure.",
    ),
    (Word::JumpToLatest, "Aller au plus récent ↓"),
    (Word::PreviewLabel, "Ce que ce message emporterait"),
    (Word::NoPreview, "Pas d’aperçu : {problem}"),
    (
        Word::PreviewWaiting,
        "Calcul de ce que ce message emporterait…",
    ),
    (Word::TokensToSend, "{tokens} jetons à envoyer"),
    (Word::PreviewItems, "Règles et références qu’il emporterait"),
    (Word::PreviewLeftOut, "Laissés de côté"),
    (
        Word::AddToConversation,
        "Ajouter {name} à cette conversation",
    ),
    (Word::Add, "Ajouter"),
    (Word::TokenCount, "{count} jetons"),
    (
        Word::RemoveFromConversation,
        "Retirer {name} de cette conversation",
    ),
    (
        Word::RemoveFromConversationHint,
        "Retirer de cette conversation",
    ),
    (Word::ContextWindow, "Fenêtre de contexte"),
    (
        Word::MeterNoReading,
        "Fenêtre de contexte : pas encore de mesure",
    ),
    (
        Word::MeterUsed,
        "{percent} % de la fenêtre de contexte utilisés : {used} sur {limit} jetons",
    ),
    (Word::CompressedFrom, "{percent} % avant compression"),
    (Word::MeterWarning, "Attention : presque pleine"),
    (Word::MeterCritical, "Critique : pleine"),
    (Word::MeterSystemPrompt, "Instructions système"),
    (Word::MeterTools, "Outils"),
    (Word::MeterKnowledge, "Connaissances"),
    (Word::MeterMemories, "Mémoires"),
    (Word::MeterPageContext, "Contexte de la page"),
    (
        Word::MeterCompression,
        "Compression ({strategy}) : {original} → {compressed} jetons, {saved} économisés ; {dropped} messages laissés de côté",
    ),
    (Word::MeterSummarized, "dont {count} résumés"),
    (
        Word::MeterBudget,
        "Budget : {remaining} jetons restants sur {limit} dans cette conversation",
    ),
    (
        Word::VocabLoading,
        "Vocabulaire {encoding} : chargement, les comptes sont des estimations",
    ),
    (
        Word::VocabCached,
        "Vocabulaire {encoding} : depuis le cache du navigateur",
    ),
    (
        Word::VocabDownloaded,
        "Vocabulaire {encoding} : {size} ko téléchargés",
    ),
    (Word::VocabReady, "Vocabulaire {encoding} : prêt"),
    (
        Word::VocabFailed,
        "Échec du vocabulaire {encoding} ({message}) ; les comptes sont des estimations",
    ),
    (
        Word::VocabNotExact,
        "{line} (pas le tokeniseur propre à ce modèle : comptes proches, pas exacts)",
    ),
    (
        Word::ApprovalAsk,
        "Autoriser l’assistant à utiliser {tool} ?",
    ),
    (Word::TokensPerRequest, "{count} jetons par requête"),
    (Word::ApprovalWith, "Avec"),
    (
        Word::ApprovalClaims,
        "Le serveur de l’outil dit qu’il {claims} (non vérifié).",
    ),
    (Word::ClaimReadsOnly, "ne fait que lire"),
    (Word::ClaimMayChange, "peut modifier des choses"),
    (Word::ClaimMayDelete, "peut supprimer ou écraser"),
    (Word::ClaimSafeToRepeat, "peut être répété sans risque"),
    (
        Word::ClaimReachesOutside,
        "accède à des services extérieurs",
    ),
    (Word::ClaimStaysWithin, "reste dans ses propres données"),
    (
        Word::ApprovalReason,
        "Motif, si vous refusez (l’assistant en est informé)",
    ),
    (Word::Approve, "Approuver"),
    (Word::Deny, "Refuser"),
    (Word::AllowForThisSession, "Autoriser pour cette session"),
    (Word::ApprovalMoreWaiting, "encore {count} en attente"),
    (Word::ReplyComplete, "Réponse terminée : {text}"),
    (Word::ReplyFailed, "Échec de la réponse : {message}"),
    (
        Word::DrawerLabel,
        "Règles, références et réglages de cette conversation",
    ),
    (Word::DrawerWaiting, "En attente du serveur…"),
    (
        Word::DrawerNoAgent,
        "Ce serveur ne configure aucun agent : il n’y a ni règle ni référence à choisir.",
    ),
    (
        Word::DrawerHeading,
        "Agent « {agent} » : {carried} éléments sur {total} dans cette conversation",
    ),
    (
        Word::DrawerHint,
        "Les éléments cochés accompagnent chaque message. Les autres sont choisis à chaque message par recherche sémantique quand leur mode est agent.",
    ),
    (Word::DrawerItemsLabel, "Règles et références"),
    (
        Word::DrawerServersLabel,
        "Serveurs d’outils et coût de leurs outils",
    ),
    (
        Word::DrawerServerCost,
        "Serveur {server} : {tools} outils, {tokens} jetons ; {carried} dans cette conversation, {carried_tokens} jetons",
    ),
    (Word::KindRule, "Règle"),
    (Word::KindReference, "Référence"),
    (Word::KindTool, "Outil"),
    (Word::DrawerToolLabel, "{server}.{name} · {tokens} jetons"),
    (Word::DrawerMode, "mode : {mode}"),
    (Word::BadgeAlways, "Toujours"),
    (Word::BadgeManual, "Manuel"),
    (Word::DrawerSettingsLegend, "Réglages de cette conversation"),
    (Word::DrawerDefaultOption, "par défaut"),
    (Word::DrawerDefaultIs, "par défaut : {value}"),
    (
        Word::DrawerReset,
        "Revenir aux réglages par défaut de l’agent",
    ),
    (Word::SettingTemperature, "Température"),
    (Word::SettingTopP, "Top p"),
    (
        Word::SettingMaxOutputTokens,
        "Réponse la plus longue (jetons)",
    ),
    (Word::SettingMaxChatTurns, "Tours d’outils par réponse"),
    (Word::SettingToolPermission, "Outils"),
    (Word::SettingToolBudget, "Budget des outils (jetons)"),
    (
        Word::SettingContextTopK,
        "Recherche : fragments correspondants (top K)",
    ),
    (
        Word::SettingContextTopN,
        "Recherche : éléments retenus (top N)",
    ),
    (
        Word::SettingContextIncludeScore,
        "Recherche : toujours retenu à partir du score",
    ),
    (
        Word::SettingContextMinScore,
        "Recherche : jamais retenu sous le score",
    ),
    (
        Word::SettingContextExpansionDepth,
        "Passes d’expansion (0 : désactivée)",
    ),
    (
        Word::SettingContextExpansionThreshold,
        "Expansion : score pour y entrer",
    ),
    (
        Word::SettingContextExpansionTopN,
        "Expansion : éléments par passe",
    ),
    (Word::DefaultProviders, "la valeur du fournisseur"),
    (Word::DefaultServers, "celle du serveur"),
    (Word::DefaultNone, "aucun"),
    (Word::ToolPermissionAsk, "demander"),
    (Word::ToolPermissionAllow, "autoriser"),
    (Word::ToolPermissionDeny, "refuser"),
    (Word::SettingNotANumber, "{key} : ce n’est pas un nombre"),
    (
        Word::SettingWantsWholeNumber,
        "{key} : un nombre entier, pas {typed}",
    ),
    (Word::SettingWantsNumber, "{key} : un nombre, pas {typed}"),
    (
        Word::SettingNotAChoice,
        "{key} : ne fait pas partie des choix",
    ),
    (Word::YourConversations, "Vos conversations"),
    (Word::NewConversation, "Nouvelle conversation"),
    (
        Word::LoadingConversations,
        "Chargement de vos conversations…",
    ),
    (
        Word::NoConversationsYet,
        "Aucune conversation pour l’instant : le premier message en commence une.",
    ),
    (Word::UntitledConversation, "Conversation sans titre"),
    (Word::ConversationNewTitle, "Nouveau titre"),
    (Word::RenameConversation, "Renommer « {title} »"),
    (Word::Rename, "Renommer"),
    (
        Word::ConfirmDeleteConversation,
        "Confirmer : supprimer « {title} » définitivement",
    ),
    (Word::DeleteConversation, "Supprimer « {title} »"),
    (Word::ClickAgainToDelete, "Cliquez à nouveau pour supprimer"),
    (Word::Delete, "Supprimer"),
    (Word::DeleteQuestion, "Supprimer ?"),
    (Word::JustNow, "à l’instant"),
    (Word::MinutesAgo, "il y a {n} min"),
    (Word::HoursAgo, "il y a {n} h"),
    (Word::Yesterday, "hier"),
    (Word::DaysAgo, "il y a {n} jours"),
    (Word::ContextManagement, "Gestion du contexte"),
    (
        Word::EnableCompression,
        "Activer la compression intelligente du contexte",
    ),
    (
        Word::CompressWhenContextReaches,
        "Quand le contexte atteint",
    ),
    (Word::CompressPercentOfLimit, " % de la limite"),
    (
        Word::CompressThresholdWhole,
        "le seuil doit être un nombre entier de 1 à 100",
    ),
    (Word::CompressStrategy, "Stratégie"),
    (Word::CompressAlwaysKeepLast, "Toujours garder les"),
    (Word::CompressMessagesIntact, "derniers messages intacts"),
    (
        Word::CompressKeepWhole,
        "le nombre de messages à garder doit être un nombre entier",
    ),
    (
        Word::ShowCompressionIndicator,
        "Afficher l’indicateur de compression dans la conversation",
    ),
    (
        Word::StickyTopicHint,
        "Les consignes permanentes parviennent toujours au modèle",
    ),
    (
        Word::TopicsSelectLabel,
        "Sujets : sélectionnez ceux qui comptent maintenant",
    ),
    (
        Word::TopicsEmpty,
        "Les sujets apparaissent après la première réponse.",
    ),
    (
        Word::TopicFilterUnavailable,
        "Le filtrage nécessite le modèle d’embeddings, qui n’est pas disponible",
    ),
    (
        Word::TopicSimilarityOff,
        "Le mode similarité est désactivé : les bulles sont là pour information",
    ),
    (
        Word::TopicSendOnlySelected,
        "N’envoyer que les messages sur les sujets sélectionnés (plus les consignes permanentes)",
    ),
    (
        Word::TopicGoneHint,
        "Ce sujet sélectionné a disparu depuis la régénération des sujets : il ne sélectionne rien. Cliquez pour l’effacer.",
    ),
    (Word::TopicGoneClear, "(disparu ; effacer)"),
    (Word::FilterHistoryByTopic, "Filtrer l’historique par sujet"),
    (Word::ReasonAlways, "toujours envoyé"),
    (Word::ReasonFits, "tient dans le budget"),
    (
        Word::ReasonPreserved,
        "récent : la compression n’y touche jamais",
    ),
    (
        Word::ReasonCompression,
        "écrit par le modèle à la place de messages plus anciens",
    ),
    (
        Word::ReasonResume,
        "premier message après la reprise de la session",
    ),
    (
        Word::ReasonToolLoop,
        "le modèle a appelé un outil en répondant",
    ),
    (
        Word::ReasonSticky,
        "une consigne permanente : toujours envoyée",
    ),
    (Word::ReasonPinned, "épinglé par vous : toujours envoyé"),
    (
        Word::ReasonTopicMember,
        "regroupé sous un sujet sélectionné",
    ),
    (Word::ReasonTopicMatch, "correspond à un sujet sélectionné"),
    (
        Word::ReasonFallback,
        "aucun message ne correspondait aux sujets sélectionnés, ils sont donc tous partis",
    ),
    (Word::ReasonManual, "ajouté à cette conversation par vous"),
    (
        Word::ReasonAgent,
        "la recherche sémantique l’a associé à votre message",
    ),
    (
        Word::ReasonExpansion,
        "la recherche sémantique l’a associé à un élément déjà retenu",
    ),
    (
        Word::ReasonLoaded,
        "laissé de côté au-delà du budget des outils, puis chargé par le modèle dans cette réponse",
    ),
    (
        Word::LeftOutLowValue,
        "un simple acquiescement, que la compression laisse de côté",
    ),
    (
        Word::LeftOutWindow,
        "plus ancien que la fenêtre glissante de la compression",
    ),
    (Word::LeftOutSummarized, "remplacé par le résumé"),
    (
        Word::LeftOutSummaryUnavailable,
        "la compression voulait un résumé, mais aucun n’a pu être écrit",
    ),
    (
        Word::LeftOutTopicFilter,
        "sous le seuil pour les sujets sélectionnés",
    ),
    (
        Word::LeftOutOtherTopic,
        "porte sur un sujet que vous n’avez pas sélectionné",
    ),
    (Word::LeftOutExcluded, "exclu par vous"),
    (
        Word::LeftOutBeyondWindow,
        "plus ancien que ce qu’une fenêtre peut contenir : non lu pour cette réponse",
    ),
    (
        Word::LeftOutMemoryCap,
        "épinglé ou consigne permanente au-delà des jetons qui leur sont réservés : la compression l’a traité comme de l’historique ancien et l’a laissé de côté",
    ),
    (
        Word::LeftOutBelowThreshold,
        "la recherche sémantique l’a noté juste sous ce qu’elle a retenu",
    ),
    (
        Word::LeftOutKnowledgeCap,
        "les règles et références ne peuvent occuper qu’un quart de la fenêtre : les éléments les moins bien classés sont écartés en premier",
    ),
    (
        Word::LeftOutToolCap,
        "les outils ne peuvent occuper que le budget des outils : les moins bien classés sont écartés en premier, et le modèle peut les charger",
    ),
    (Word::ReceiptWhyScore, "{why} (score {score})"),
    (Word::ReceiptWhyScores, "{why} (scores {low}–{high})"),
    (Word::ReceiptMessagesOne, "1 message"),
    (Word::ReceiptMessagesMany, "{count} messages"),
    (Word::ReceiptSummaryOne, "Résumé d’un message"),
    (Word::ReceiptSummaryMany, "Résumé de {count} messages"),
    (Word::ReceiptToolsOffered, "Outils proposés"),
    (Word::ReceiptResume, "Rappel du contexte de la session"),
    (
        Word::ReceiptToolCall,
        "Tour d’outils {round}, appel {call} : {name}",
    ),
    (
        Word::ReceiptToolCallError,
        "Tour d’outils {round}, appel {call} : {name} (erreur)",
    ),
    (Word::ReceiptAttachments, "Ses pièces jointes"),
    (Word::ReceiptImage, "Image {name}"),
    (Word::ReceiptTextFile, "Fichier texte {name}"),
    (Word::ReceiptUserMessage, "Le message auquel on répond"),
    (Word::ReceiptRuleItem, "Règle {priority} · {name}"),
    (Word::ReceiptReferenceItem, "Référence {priority} · {name}"),
    (Word::ReceiptToolItem, "Outil {server}.{name}"),
    (
        Word::ReceiptNoteSystemPrompt,
        "Son texte reste sur le serveur.",
    ),
    (
        Word::ReceiptNotePageContext,
        "Envoyé comme données de la page, pas comme instructions.",
    ),
    (
        Word::ReceiptNoteTools,
        "Les définitions et les instructions restent sur le serveur ; chaque outil a sa propre ligne.",
    ),
    (
        Word::ReceiptNoteAttachments,
        "Leurs métadonnées (nom, type, taille, lien), envoyées comme données.",
    ),
    (
        Word::ReceiptNoteImage,
        "Envoyée comme image ; jetons selon la règle du fournisseur pour sa taille.",
    ),
    (
        Word::ReceiptNoteTextFile,
        "Son texte, envoyé comme données délimitées.",
    ),
    (
        Word::ReceiptNoteToolItem,
        "Sa définition est proposée avec la requête ; ses résultats reviennent comme données.",
    ),
    (
        Word::ReceiptNoteItem,
        "Envoyé comme données dans le tour de votre message, après la conversation.",
    ),
    (Word::BadgeAgent, "Agent"),
    (Word::BadgeExpansion, "Expansion"),
    (
        Word::ReceiptMissBelowThresholdScore,
        "{score}, sous le seuil",
    ),
    (Word::ReceiptMissBelowThreshold, "sous le seuil"),
    (
        Word::ReceiptMissKnowledgeCap,
        "laissé de côté : au-delà du budget des connaissances",
    ),
    (
        Word::ReceiptMissToolCap,
        "laissé de côté : au-delà du budget des outils (le modèle peut le charger)",
    ),
    (
        Word::ItemSearchNoItems,
        "Aucun élément parmi lesquels la recherche sémantique pourrait choisir.",
    ),
    (
        Word::ItemSearchUnavailable,
        "La recherche sémantique n’était pas disponible : cette réponse est partie sans éléments choisis par l’agent.",
    ),
    (
        Word::ItemSearchUnavailableWhy,
        "La recherche sémantique n’était pas disponible ({reason}) : cette réponse est partie sans éléments choisis par l’agent.",
    ),
    (
        Word::ItemSearchFailed,
        "La recherche sémantique a échoué : cette réponse est partie sans éléments choisis par l’agent.",
    ),
    (
        Word::ItemSearchFailedWhy,
        "La recherche sémantique a échoué ({reason}) : cette réponse est partie sans éléments choisis par l’agent.",
    ),
    (Word::FooterPort, "port {port}"),
    (Word::StrategySummarize, "Résumer seulement"),
    (
        Word::StrategyDropLowValue,
        "Écarter les messages de faible valeur seulement",
    ),
    (Word::StrategySlidingWindow, "Fenêtre glissante (simple)"),
    (
        Word::StrategyHybrid,
        "Résumer et écarter les messages de faible valeur (hybride, recommandé)",
    ),
    (
        Word::TopicsAllInContext,
        "Tous les messages sont dans le contexte",
    ),
    (
        Word::TopicsInContextOne,
        "{count} sur {total} message dans le contexte",
    ),
    (
        Word::TopicsInContextMany,
        "{count} sur {total} messages dans le contexte",
    ),
    (Word::StickyTopic, "Instructions et préférences"),
    (
        Word::Overflow,
        "Ce message ne peut pas être envoyé : la conversation demande {needed} jetons mais la fenêtre du modèle n’a de place que pour {room} (une fois la réponse réservée). Raccourcissez le message, activez la compression ou baissez « Garder les messages récents », ou commencez une nouvelle discussion.",
    ),
];

/// The French strings in the keys' order.
pub(super) fn table() -> Vec<&'static str> {
    let mut out = vec![""; Word::COUNT];
    for (word, french) in FRENCH {
        out[*word as usize] = french;
    }
    out
}

crate::chunks::split_fn! {
    /// The French strings, fetched with their chunk.
    strings / preload_strings () -> Arc<[&'static str]> => table().into()
}

#[cfg(test)]
mod tests {
    use strum::VariantArray;

    use super::*;

    #[test]
    fn every_key_has_its_french_once_with_the_same_slots() {
        for word in Word::VARIANTS {
            let found: Vec<_> = FRENCH.iter().filter(|(w, _)| w == word).collect();
            assert_eq!(found.len(), 1, "{word:?} in French {} times", found.len());
            let mut english = super::super::slots(super::super::table::english(*word));
            let mut french = super::super::slots(found[0].1);
            english.sort_unstable();
            french.sort_unstable();
            assert_eq!(english, french, "{word:?}: the French has other slots");
        }
    }
}
